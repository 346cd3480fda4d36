//! Finish: the run file from what was recorded, the files (written before anything is
//! printed, the run file last), then the report.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::prepare::Prepared;
use super::record::Recorded;
use super::{Console, RunOutcome, RunPlan};
use crate::attribution::advice::{Machine, Tracer};
use crate::report::build::{consumer_key, culprit_entry, probe_info, spike_entry, stall_entry};
use crate::report::files::OutputError;
use crate::report::runfile::{
    ConsumerHistograms, Lost, Overhead, RunFile, RunInfo, Settings, SCHEMA,
};
use crate::report::{export, hgrm, text};
use crate::summary::Summary;

pub(super) fn finish(
    plan: &RunPlan,
    p: Prepared,
    r: Recorded,
    out: &mut Console,
) -> Result<RunOutcome> {
    let files_from = crate::system::cputime::process_cpu_ns();
    let mut run = run_file(plan, &p, &r);
    // The files first: a report that cannot be printed (standard output gone) or a signal
    // arriving now must not cost the run its files. A file that cannot be written (full
    // disk) does not stop the report from being printed.
    let mut file_error: Option<OutputError> = None;
    let (hgrm_paths, written) = write_files(plan, &p, &r, &mut run, files_from, &mut file_error);
    write!(out, "\n{}", text::render(&run, plan.colour))?;
    print_notes(&p, &r, out)?;
    if let Some(e) = file_error {
        return Err(anyhow::Error::new(e)
            .context("the run's files are incomplete (the report above is what was measured)"));
    }
    if let Some(why) = &r.metrics_failed {
        anyhow::bail!("{why}; the metrics file was not rewritten at the end (the report above and the run's files are complete)");
    }
    let json_path = written.last().cloned().unwrap_or_default();
    writeln!(out, "\nrun file:     {}", json_path.display())?;
    for f in &written[..written.len().saturating_sub(1)] {
        writeln!(out, "              {}", f.display())?;
    }
    for f in &hgrm_paths {
        writeln!(out, "              {} (HdrHistogram, µs)", f.display())?;
    }
    writeln!(
        out,
        "              {} (interval log)",
        p.hlog_path.display()
    )?;
    for line in r.metrics.iter().flat_map(|m| m.closing_lines()) {
        writeln!(out, "{line}")?;
    }
    Ok(RunOutcome {
        run,
        json_path,
        hgrm_paths,
        hlog_path: p.hlog_path.clone(),
    })
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
            .ranked(&machine)
            .into_iter()
            .map(culprit_entry)
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
        },
        probes: r.probes.as_ref().map(|(a, s)| probe_info(a, s, &r.attr)),
        overhead: overhead(r),
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
        // Set as the files are written (see write_files).
        files_cpu_ns: 0,
    })
}

/// The `.hgrm` files, then every exporter's file with the run file last (its presence says
/// the others were written before it). The first error is kept in `error`.
/// `files_from` is the process's CPU time when the files began: what they cost up to the
/// first file that shows it goes into the run's `overhead.files_cpu_ns`.
fn write_files(
    plan: &RunPlan,
    p: &Prepared,
    r: &Recorded,
    run: &mut RunFile,
    files_from: u64,
    error: &mut Option<OutputError>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut keep = |res: Result<PathBuf, OutputError>| match res {
        Ok(path) => Some(path),
        Err(e) => {
            error.get_or_insert(e);
            None
        }
    };
    let mut hgrm_paths = Vec::new();
    for (i, t) in r.totals.iter().enumerate() {
        for (kind, h) in [("transit", &t.transit), ("inter_message", &t.inter_message)] {
            let name = format!("{}.{}.{kind}.hgrm", p.stem, consumer_key(i));
            hgrm_paths.extend(keep(
                plan.output
                    .write(&name, hgrm::percentile_distribution(h, 1000.0).as_bytes()),
            ));
        }
    }
    let mut written = Vec::new();
    let mut costed = false;
    for e in export::run_files() {
        if e.shows_overhead() && !costed {
            costed = true;
            let ns = crate::system::cputime::process_cpu_ns().saturating_sub(files_from);
            if let Some(o) = run.overhead.as_mut() {
                o.files_cpu_ns = ns;
            }
        }
        written.extend(keep(plan.output.write(
            &format!("{}{}", p.stem, e.suffix()),
            e.render(run).as_bytes(),
        )));
    }
    (hgrm_paths, written)
}

fn print_notes(p: &Prepared, r: &Recorded, out: &mut Console) -> Result<()> {
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
    if let Some(e) = &r.hlog_error {
        writeln!(
            out,
            "WARNING: the interval log {} is incomplete: {e}",
            p.hlog_path.display()
        )?;
    }
    Ok(())
}
