//! A run once it stopped: its run file (histograms, stalls, spikes, overhead), its `.hgrm`
//! files and its notes, for the one finish.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::super::prepare::Prepared;
use super::super::source::{StoppedSource, Words};
use super::super::{Console, RunPlan};
use super::{Recorded, WORDS};
use crate::report::advice::{Machine, Tracer};
use crate::report::build::{consumer_key, culprit_entry, probe_info, spike_entry, stall_entry};
use crate::report::files::{OutputDir, OutputError};
use crate::report::hgrm;
use crate::report::metrics::MetricsFile;
use crate::report::runfile::{
    ConsumerHistograms, Lost, Overhead, RunFile, RunInfo, Settings, SCHEMA,
};
use crate::summary::Summary;

/// A run once its workload and probes stopped.
pub(in crate::session) struct RunStopped {
    pub(super) plan: RunPlan,
    pub(super) p: Prepared,
    pub(super) r: Recorded,
}

impl StoppedSource for RunStopped {
    fn words(&self) -> Words {
        WORDS
    }

    fn colour(&self) -> bool {
        self.plan.colour
    }

    fn output(&self) -> &OutputDir {
        &self.plan.output
    }

    fn stem(&self) -> &str {
        &self.p.stem
    }

    fn files_costed(&self) -> bool {
        true
    }

    fn run_file(&mut self, error: &mut Option<OutputError>) -> (RunFile, Vec<PathBuf>) {
        let run = run_file(&self.plan, &self.p, &self.r);
        (run, write_hgrms(&self.plan, &self.p, &self.r, error))
    }

    fn notes(&self, out: &mut Console) -> Result<()> {
        print_notes(&self.r, out)
    }

    fn interval_log(&self) -> (&Path, Option<&std::io::Error>) {
        (&self.p.hlog_path, self.r.hlog_error.as_ref())
    }

    fn metrics(&self) -> (Option<&MetricsFile>, Option<&str>) {
        (self.r.metrics.as_ref(), self.r.metrics_failed.as_deref())
    }
}

fn run_file(plan: &RunPlan, p: &Prepared, r: &Recorded) -> RunFile {
    let probes_on = r.probes.is_some();
    let machine = Machine {
        online: p.topo.online.clone(),
        measured: p.measured.clone(),
        virtual_machine: crate::system::is_virtual_machine(),
        tracer: Tracer::Run(plan.decision),
    };
    RunFile {
        schema: SCHEMA.to_string(),
        mode: crate::report::runfile::Mode::Run,
        watch: None,
        threads: Vec::new(),
        run: run_info(plan, p, r),
        histograms: r
            .totals
            .iter()
            .enumerate()
            .map(|(i, t)| ConsumerHistograms {
                consumer: consumer_key(i),
                cpu: p.cfg.consumer_cpus[i],
                transit: Summary::of(&t.transit),
                inter_message: Summary::of(&t.inter_message),
            })
            .collect(),
        stall_summary: r.attr.book.totals().into(),
        stalls: r
            .attr
            .book
            .worst()
            .into_iter()
            .map(|v| stall_entry(v, probes_on))
            .collect(),
        culprits: r
            .attr
            .ranking
            .ranked()
            .into_iter()
            .map(|c| culprit_entry(c, &machine))
            .collect(),
        spike_count: r.attr.spike_count,
        spikes: r
            .attr
            .spikes
            .iter()
            .map(|v| spike_entry(v, probes_on))
            .collect(),
        lost: Lost {
            ring_buffer_drops: r.probes.as_ref().map_or(0, |p| p.1.total_drops()),
            workload_queue_drops: r.counters.queue_drops,
            sequence_errors: r.counters.sequence_errors,
            threads_not_watched: 0,
        },
        probes: r.probes.as_ref().map(|(a, s)| probe_info(a, s, &r.attr)),
        overhead: overhead(r),
        config: p.config.clone(),
    }
}

fn run_info(plan: &RunPlan, p: &Prepared, r: &Recorded) -> RunInfo {
    let cfg = &p.cfg;
    RunInfo {
        label: plan.label.clone(),
        cpus: p.measured.clone(),
        producer_cpu: cfg.producer_cpu,
        consumer_cpus: cfg.consumer_cpus.clone(),
        start_unix_ns: p.start_unix,
        record_from_ns: p.record_from,
        duration_ns: r.stop_ns.saturating_sub(p.record_from),
        kernel: crate::system::kernel_release(),
        host: crate::system::host_name(),
        ended: r.ended.ended(),
        end_reason: r.ended.reason().to_string(),
        floor: p.floor,
        settings: Settings {
            pinned: cfg.pin,
            interval_ns: cfg.interval_ns,
            warmup_ns: cfg.warmup_ns,
            planned_duration_ns: cfg.duration_ns,
            stall_threshold_ns: cfg.stall_threshold_ns,
            spike_threshold_ns: cfg.spike_threshold_ns,
            stall_threshold_auto: plan.stall_threshold_auto,
            probes: r.probes.is_some(),
            consumer_fifo: cfg.consumer_fifo,
        },
    }
}

/// jitterscope's own cost over the recorded window: its threads' CPU time (the process's
/// less the workload's) and the BPF programs'.
fn overhead(r: &Recorded) -> Option<Overhead> {
    let (a, b) = r.cpu?;
    if b.at_ns <= a.at_ns {
        return None;
    }
    let (bpf_run_ns, bpf_events) = r.probes.as_ref().map_or((0, 0), |(_, p)| {
        (
            p.costs.iter().map(|c| c.run_time_ns).sum(),
            p.costs.iter().map(|c| c.run_count).sum(),
        )
    });
    Some(Overhead {
        window_ns: b.at_ns - a.at_ns,
        tracer_cpu_ns: b
            .process_ns
            .saturating_sub(a.process_ns)
            .saturating_sub(b.workload_ns.saturating_sub(a.workload_ns)),
        bpf_run_ns,
        bpf_events,
        longest_self: crate::report::build::longest_self(&r.attr),
        collector_budget: r.budget.map(|(share, _)| share),
        held_back: r.budget.map_or(0, |(_, n)| n),
        after_cpu_ns: r.after_cpu_ns,
        at_end: r.decision.at_end(),
        decided_in_run: r.decided_in_run,
        // Set as the files are written (see `finish::write_exports`).
        files_cpu_ns: 0,
    })
}

/// Each consumer's two `.hgrm` files (transit, inter-message); the first error in `error`.
fn write_hgrms(
    plan: &RunPlan,
    p: &Prepared,
    r: &Recorded,
    error: &mut Option<OutputError>,
) -> Vec<PathBuf> {
    let mut hgrm_paths = Vec::new();
    for (i, t) in r.totals.iter().enumerate() {
        for (kind, h) in [("transit", &t.transit), ("inter_message", &t.inter_message)] {
            let name = format!("{}.{}.{kind}.hgrm", p.stem, consumer_key(i));
            match plan
                .output
                .write(&name, hgrm::percentile_distribution(h, 1000.0).as_bytes())
            {
                Ok(path) => hgrm_paths.push(path),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
    }
    hgrm_paths
}

fn print_notes(r: &Recorded, out: &mut Console) -> Result<()> {
    if r.counters.ring_full > 0 {
        writeln!(
            out,
            "note: the producer found the ring full {} times (a consumer fell a whole ring behind); those publishes were delayed, not lost",
            r.counters.ring_full
        )?;
    }
    if r.counters.rotations_missed > 0 {
        writeln!(
            out,
            "note: {} one-second interval histograms were handed over late (the collector lagged); those intervals are longer in the .hlog, nothing was lost",
            r.counters.rotations_missed
        )?;
    }
    Ok(())
}
