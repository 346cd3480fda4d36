//! The live view's culprit rows from the run's ranking, for every kind of session: inferred
//! time a row of its own, never added to a culprit's measured time.

use crate::attribution::run::RunAttribution;
use crate::live::CulpritRow;
use crate::model::Nanos;
use crate::report::culprit;
use crate::report::text::inferred_row_name;

/// Culprits the live view is given (more than a terminal shows: it sorts them its own ways).
const LIVE_CULPRITS: usize = 50;

/// The first `limit` rows of the ranking as the live view lists it (all of them for
/// `usize::MAX`): inferred time is a row of its own, never added to a culprit's measured time.
/// `pace` is called between rows (see `Pacer`).
pub(super) fn culprit_rows(
    attr: &RunAttribution,
    record_from: Nanos,
    limit: usize,
    pace: &mut dyn FnMut(),
) -> Vec<CulpritRow> {
    // A culprit's rows never hold more than its total, and the ranking is by total: once the
    // `limit`-th row holds at least the last culprit taken's total, no culprit after it can
    // come before that row (ties keep ranking order). A few culprits answer the plain line.
    let mut n = limit.saturating_mul(2).clamp(4, LIVE_CULPRITS);
    loop {
        let top = attr.ranking.top(n);
        let last_total = top.last().map_or(0, |c| c.total_ns());
        let taken = top.len();
        let mut rows = rows_of(top, record_from, pace);
        let settled = rows
            .get(limit.saturating_sub(1))
            .is_some_and(|r| limit > 0 && r.total_ns >= last_total);
        if taken < n || n == LIVE_CULPRITS || settled {
            rows.truncate(limit);
            return rows;
        }
        n = n.saturating_mul(4).min(LIVE_CULPRITS);
    }
}

/// Rows of `top` culprits, the most stolen time first.
fn rows_of(
    top: Vec<crate::attribution::ranking::RankedCulprit>,
    record_from: Nanos,
    pace: &mut dyn FnMut(),
) -> Vec<CulpritRow> {
    let mut rows: Vec<CulpritRow> = Vec::new();
    for c in top {
        pace();
        let all = c.total_ns().max(1) as f64;
        let (mut name, detail) = culprit::words(&c.culprit);
        if let Some(p) = &c.processes {
            name = culprit::grouped_name(&name, p.count, p.more);
        }
        let row = |name: String, inferred: bool, ns: Nanos| CulpritRow {
            class: c.class(),
            inferred,
            name,
            detail: detail.clone(),
            count: c.episodes,
            total_ns: ns,
            max_ns: c.longest_ns,
            last_seen_ns: c.last_ns.saturating_sub(record_from),
            share: c.share * ns as f64 / all,
        };
        if c.measured_ns > 0 || c.inferred_ns == 0 {
            rows.push(row(name.clone(), false, c.measured_ns));
        }
        if c.inferred_ns > 0 {
            rows.push(row(inferred_row_name(&name), true, c.inferred_ns));
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::engine::{Share, Verdict};
    use crate::model::{CulpritClass, Stall, ThreadRole};

    fn share((comm, pid): (&str, u32), measured_ns: Nanos, inferred_ns: Nanos) -> Share {
        let comm: crate::model::Text = comm.into();
        Share {
            culprit: crate::model::Culprit {
                class: CulpritClass::Task,
                who: crate::model::Who::Task {
                    comm,
                    pid,
                    policy: 0,
                    container: None,
                },
            },
            via: None,
            measured_ns,
            inferred_ns,
            host_ns: 0,
            episodes: 1,
            longest_ns: measured_ns,
            share: 0.0,
        }
    }

    /// Culprits whose totals fall in ranking order while their rows do not: the first
    /// culprits split into a measured and an inferred row each smaller than the rows of
    /// culprits ranked after them, with ties among the rows.
    fn attribution() -> RunAttribution {
        let mut attr = RunAttribution::new(0, vec![1], 10, true, true, 0);
        // Each culprit a command name of its own: tasks of one name share a row.
        let parts: Vec<((String, u32), Nanos, Nanos)> = (0..40u64)
            .map(|k| match k {
                0..=5 => ((format!("split-{k}"), k as u32), 60 - k, 60),
                _ => ((format!("whole-{k}"), k as u32), 100 - k.min(30), 0),
            })
            .collect();
        for ((comm, pid), measured, inferred) in parts {
            let name = (comm.as_str(), pid);
            attr.keep_verdict(Verdict {
                stall: Stall {
                    cpu: 0,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: measured + inferred,
                },
                culprits: vec![share(name, measured, inferred)],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            });
        }
        attr
    }

    #[test]
    fn the_first_rows_are_the_head_of_all_rows() {
        let attr = attribution();
        let all = culprit_rows(&attr, 0, usize::MAX, &mut || {});
        assert_eq!(all.len(), 46, "6 split culprits give two rows each");
        assert_eq!(
            all[0].name, "whole-6[6]",
            "a later culprit's row comes first"
        );
        for limit in 0..=all.len() + 2 {
            let head = culprit_rows(&attr, 0, limit, &mut || {});
            assert_eq!(head, all[..limit.min(all.len())].to_vec(), "limit {limit}");
        }
    }

    #[test]
    fn a_shell_loops_processes_are_one_live_row_and_inferred_rows_are_marked() {
        let mut attr = RunAttribution::new(0, vec![1], 10, true, true, 0);
        let mut stall = |culprit: Share| {
            attr.keep_verdict(Verdict {
                stall: Stall {
                    cpu: 1,
                    thread: ThreadRole::Producer,
                    start_ns: 0,
                    end_ns: culprit.measured_ns + culprit.inferred_ns,
                },
                culprits: vec![culprit],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            })
        };
        for pid in 0..30u32 {
            let ns = if pid == 7 { 1_010_000 } else { 1_000_000 };
            stall(share(("taskset", 5000 + pid), ns, 0));
        }
        stall(share(("bash", 4121), 40_000_000, 2_000_000));
        let rows = culprit_rows(&attr, 0, usize::MAX, &mut || {});
        let shown: Vec<(&str, bool, u64, Nanos, Nanos)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.inferred, r.count, r.total_ns, r.max_ns))
            .collect();
        assert_eq!(
            shown,
            [
                ("bash[4121]", false, 1, 40_000_000, 40_000_000),
                ("taskset — 30 tasks", false, 30, 30_010_000, 1_010_000),
                ("bash[4121] — entry/exit", true, 1, 2_000_000, 40_000_000),
            ]
        );
    }
}
