//! A run's live model: its consumers' rows, the culprits (or, deciding at the end, the
//! kernel's time by culprit) and the spike feed.

use std::collections::VecDeque;

use super::super::prepare::Prepared;
use super::super::rows::culprit_rows;
use super::super::RunPlan;
use super::Recorder;
use crate::attribution::ranking::task_row;
use crate::live::model::ConsumerView;
use crate::live::{CulpritRow, LiveModel};
use crate::model::{Decision, Nanos, Spike};
use crate::report::build::{consumer_key, kernel_window_spike, spike_entry};
use crate::report::culprit;
use crate::report::text;
use crate::summary::Summary;

/// Deciding at the end, spikes the live view lists each turn by the kernel time in their
/// window: the latest, as many as its feed shows (each is tens of µs of the collector's,
/// cold, on a CPU it shares with the workload).
pub(super) const WINDOWS_SHOWN: usize = crate::live::view::FEED_ROWS as usize;
/// Spikes peeked at and waiting for a glance past their receipt, at most (the oldest go
/// first): those received between the glance's start and the collector's turn after it.
pub(super) const PEEKED_KEPT: usize = 256;

/// How far behind the attribution may be before the live view says so: in step, the oldest
/// undecided stall is at most a turn and the decision lag old (0.6 s).
pub(super) const AWAITING_SHOWN_NS: Nanos = 1_000_000_000;

impl Recorder {
    /// Brings the live model up to date.
    pub(super) fn update_live(&mut self, p: &Prepared, now: Nanos) {
        let live = &mut self.live;
        let pacer = &mut self.pacer;
        live.elapsed_ns = now.saturating_sub(p.record_from).min(live.planned_ns);
        live.messages_per_s = self
            .totals
            .first()
            .filter(|t| t.last_interval_ns > 0)
            .map_or(0.0, |t| {
                t.last_messages as f64 * 1e9 / t.last_interval_ns as f64
            });
        live.stalls = self.attr.book.count();
        let (undecided, oldest) = self.attr.engine.undecided_stalls();
        live.awaiting = if live.at_end {
            // Most wait in the workload's queues, not yet taken in.
            let waiting = undecided + p.workload.stalls_queued();
            (waiting > 0).then_some((waiting as u64, 0))
        } else {
            oldest
                .map(|end| now.saturating_sub(end))
                .filter(|&behind| behind > AWAITING_SHOWN_NS)
                .map(|behind| (undecided as u64, behind))
        };
        live.lost = self.attr.lost_records + super::counters(&p.workload).queue_drops;
        live.bpf_cost = p
            .probe
            .as_ref()
            .filter(|_| self.needs.bpf_cost)
            .and_then(|(s, _)| s.live_cost())
            .filter(|c| c.events > 0)
            .map(|c| {
                (
                    c.run_time_ns as f64 / c.events as f64,
                    c.run_time_ns as f64 / now.saturating_sub(p.record_from).max(1) as f64,
                )
            });
        for (i, c) in live.consumers.iter_mut().enumerate() {
            pacer.between();
            c.interval = self.totals.get(i).and_then(|t| t.last_transit.clone());
            if !self.needs.run_totals {
                continue;
            }
            c.total =
                (self.view_totals.get(i).filter(|t| !t.is_empty())).map(Summary::percentiles_only);
        }
        if live.at_end {
            // The stalls wait for the end: the kernel's time by culprit so far instead (its
            // rows a piece of their own).
            pacer.between();
            if let Some(k) = p.preview.as_ref().and_then(|v| v.kernel_time()) {
                live.kernel_total_ns = Some(k.total_ns);
                live.kernel_unseen = k.end_unseen;
                // Every lost-record window the glances and drains saw, in the rings or not.
                live.lost = k.lost + super::counters(&p.workload).queue_drops;
                pacer.between();
                live.culprits = kernel_rows(&k, p.record_from);
            }
        } else if self.attr.probes_on {
            pacer.between();
            live.culprits =
                culprit_rows(&self.attr, p.record_from, self.needs.culprits, &mut || {
                    pacer.between();
                });
        }
        if live.at_end {
            self.kernel_window_spikes(p);
            return;
        }
        // Each spike once: those decided since the last look (the latest few).
        let fresh = std::mem::take(&mut self.attr.fresh_spikes);
        if !self.needs.feed {
            return;
        }
        let live = &mut self.live;
        for v in &fresh {
            self.pacer.between();
            let line = text::spike_line(p.record_from, &spike_entry(v, self.attr.probes_on));
            if live.feed.back() != Some(&line) {
                live.push_feed(line);
            }
        }
    }

    /// Deciding at the end, the latest spikes into the live view's feed, each by the kernel
    /// time in its window (`build::kernel_window_spike`) once the glances at the rings have
    /// gone past its receipt: within a turn of it.
    pub(super) fn kernel_window_spikes(&mut self, p: &Prepared) {
        if !self.needs.feed {
            return;
        }
        // Each look is a piece of its own (cold, tens of µs): not in one with what came
        // before it.
        self.pacer.between();
        // The recent episodes' lock is taken for each look alone, never across a pause (the
        // drain thread takes it at each step of its glance).
        let recent = || p.preview.as_ref().and_then(|v| v.recent());
        let Some(complete) = recent().map(|r| r.complete_to_ns()) else {
            return;
        };
        // Those waiting from the last turn, then the new ones, in the order they came: a spike
        // received before the latest complete glance began is ready to be shown; the others
        // wait for the next (the few received since that glance began).
        let (waiting, ready) = (&mut self.peeked, &mut self.ready_spikes);
        let mut take = |s: Spike, waiting: &mut VecDeque<Spike>| {
            if s.receive_ns >= complete {
                if waiting.len() == PEEKED_KEPT {
                    waiting.pop_front();
                }
                waiting.push_back(s);
                return;
            }
            if ready.len() == WINDOWS_SHOWN {
                ready.pop_front();
            }
            ready.push_back(s);
        };
        for _ in 0..waiting.len() {
            if let Some(s) = waiting.pop_front() {
                take(s, waiting);
            }
        }
        p.workload
            .peek_spikes(&mut self.spikes_seen, &mut |s| take(*s, waiting));
        self.pacer.between();
        let cfg = &p.cfg;
        let cpus = |s: &Spike| {
            let consumer_cpu = cfg.consumer_cpus.get(s.consumer as usize)?;
            Some((cfg.producer_cpu, *consumer_cpu))
        };
        let ready = std::mem::take(&mut self.ready_spikes);
        for s in &ready {
            let Some(cpus) = cpus(s) else {
                continue;
            };
            self.pacer.between();
            let Some(spike) = recent().map(|r| kernel_window_spike(s, cpus, &r)) else {
                break;
            };
            self.live
                .push_feed(text::kernel_window_spike_line(p.record_from, &spike));
        }
        self.ready_spikes = ready;
        self.ready_spikes.clear();
    }
}

/// Deciding at the end, the live view's rows: each culprit's kernel time on the measured
/// CPUs so far (see `attribution::tally`), its share of all of it. Tasks of one class, command
/// name and policy among the listed culprits are one row (`taskset — 31 tasks`), as in the
/// report; one task alone keeps its pid.
pub(super) fn kernel_rows(
    k: &crate::attribution::tally::KernelTime,
    record_from: Nanos,
) -> Vec<CulpritRow> {
    let all = k.total_ns.max(1) as f64;
    // (row, tasks in it) by the culprit with its pid folded; a scan: at most `LISTED` rows.
    let mut rows: Vec<(crate::model::Culprit, CulpritRow, u64)> = Vec::new();
    for c in &k.culprits {
        let key = task_row(&c.culprit).map_or_else(|| c.culprit.clone(), |(row, _)| row);
        if let Some((_, r, tasks)) = rows.iter_mut().find(|(k, ..)| *k == key) {
            r.count += c.episodes;
            r.total_ns += c.ns;
            r.max_ns = r.max_ns.max(c.longest_ns);
            r.last_seen_ns = r.last_seen_ns.max(c.last_ns.saturating_sub(record_from));
            r.share = r.total_ns as f64 / all;
            *tasks += 1;
            continue;
        }
        let row = CulpritRow {
            class: c.culprit.class,
            inferred: false,
            name: culprit::name(&c.culprit.who),
            detail: culprit::detail(&c.culprit.who),
            count: c.episodes,
            total_ns: c.ns,
            max_ns: c.longest_ns,
            last_seen_ns: c.last_ns.saturating_sub(record_from),
            share: c.ns as f64 / all,
        };
        rows.push((key, row, 1));
    }
    let mut out: Vec<CulpritRow> = rows
        .into_iter()
        .map(|(key, mut r, tasks)| {
            if tasks > 1 {
                r.name = culprit::grouped_name(&culprit::name(&key.who), tasks, false);
            }
            r
        })
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    out
}

pub(super) fn initial_model(plan: &RunPlan, p: &Prepared) -> LiveModel {
    let cfg = &p.cfg;
    LiveModel {
        label: plan.label.clone(),
        producer_cpu: cfg.producer_cpu,
        consumer_cpus: cfg.consumer_cpus.clone(),
        kernel: crate::system::kernel_release(),
        planned_ns: cfg.duration_ns,
        probes: p.probe.is_some(),
        consumers: cfg
            .consumer_cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| ConsumerView {
                name: consumer_key(i),
                cpu,
                ..ConsumerView::default()
            })
            .collect(),
        note: match (plan.decision, p.every_cpu_measured) {
            (
                Decision::AtEnd {
                    chosen_by_default: true,
                },
                _,
            ) => Some(
                "every CPU is measured, so culprits are decided at the end of the run (--attribution live decides them as it goes, at a cost under `self`): meanwhile, the kernel's time by culprit".to_string(),
            ),
            (Decision::AtEnd { .. }, _) => Some(
                "culprits are decided at the end of the run (--attribution end): the records wait in the kernel's rings meanwhile".to_string(),
            ),
            (Decision::Live, true) => Some(
                "every CPU is measured: the display refreshes once a second and its cost shows under `self`".to_string(),
            ),
            (Decision::Live, false) => None,
        },
        at_end: plan.decision.at_end(),
        ..LiveModel::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::tally::{KernelCulprit, KernelTime};
    use crate::model::{Culprit, CulpritClass, Who};

    fn task(comm: &str, pid: u32, ns: Nanos) -> KernelCulprit {
        KernelCulprit {
            culprit: Culprit {
                class: CulpritClass::Task,
                who: Who::Task {
                    comm: comm.into(),
                    pid,
                    policy: 0,
                    container: None,
                },
            },
            episodes: 1,
            ns,
            longest_ns: ns,
            last_ns: 0,
        }
    }

    #[test]
    fn deciding_at_the_end_a_shell_loops_tasks_are_one_live_row() {
        let mut culprits = vec![task("bash", 4121, 40_000_000)];
        culprits.extend((0..30).map(|i| task("taskset", 5000 + i, 1_000_000 + u64::from(i))));
        let k = KernelTime {
            culprits,
            total_ns: 70_000_000,
            lost: 0,
            end_unseen: 0,
        };
        let rows = kernel_rows(&k, 0);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].name, "bash[4121]");
        assert_eq!(rows[1].name, "taskset — 30 tasks");
        assert_eq!((rows[1].count, rows[1].max_ns), (30, 1_000_029));
        assert_eq!(rows[1].total_ns, 30_000_000 + (0..30).sum::<u64>());
    }
}
