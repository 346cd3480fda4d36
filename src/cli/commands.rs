//! The commands that compose several concerns at the top — `run` (the session, with injected
//! noise beside it), `floor` (the workload's measurement in the seed's block) — and the
//! few-line ones over `report` and `attribution`: `report`, `compare`, `bench-engine`,
//! `completions`. Each writes its output to `out`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::CommandFactory;

use super::plan::{census_config, colour_on_stdout, floor_config, metrics_plan, run_plan};
use super::{Cli, CompareArgs, FloorArgs, ProbeArgs, ReportArgs, RunArgs, UsageError, WatchArgs};
use crate::model::Cpu;
use crate::platform::input;
use crate::probe::census;
use crate::report::files::write_file;
use crate::report::metrics::ProbeMetrics;
use crate::report::runfile::RunFile;
use crate::report::{compare as comparison, export, seed, text};
use crate::session::{self, RunPlan};
use crate::signals::Interrupted;
use crate::system::cpus::Topology;
use crate::system::tuning::restore_leftovers;
use crate::workload::pingpong;
use crate::workshop::noise::{NoiseKind, NoiseSet};

/// `jitterscope run` (the default command): the measured run, with any `--inject` noise
/// running for the whole of it; an error (exit 1) when the run lost its CPU.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<()> {
    let plan = run_plan(args)?;
    restore_leftovers();
    let noise = (!args.inject.is_empty()).then(|| start_noise(&args.inject, &plan));
    let result = session::run(plan, out);
    if let Some(n) = noise {
        for (kind, r) in n.stop() {
            match r {
                Ok(count) => writeln!(out, "injected {kind:?} noise: {count} injections")?,
                Err(e) => writeln!(out, "injected {kind:?} noise: {e}")?,
            }
        }
    }
    let outcome = result.map_err(|e| {
        if e.is::<Interrupted>() {
            e
        } else {
            e.context("the run failed")
        }
    })?;
    let _ = out.flush();
    if outcome.run.run.ended == crate::model::Ended::CpuLost {
        anyhow::bail!(
            "the run ended early: {}; {} holds what was measured until then (marked cpu_lost)",
            outcome.run.run.end_reason,
            outcome.json_path.display()
        );
    }
    Ok(())
}

/// `jitterscope probe`: the census, and the metrics file beside it when asked for.
pub fn probe(args: &ProbeArgs, out: &mut dyn Write) -> Result<()> {
    let cfg = census_config(args)?;
    match metrics_plan(args.metrics.as_deref(), args.metrics_interval)? {
        Some(plan) => {
            let mut metrics = ProbeMetrics::new(plan, cfg.cpus.clone());
            census::run_observed(&cfg, &mut metrics, out)
        }
        None => census::run(&cfg, out),
    }
}

/// `jitterscope check`: the report in the format asked for (and as JSON to `--json`); an
/// error (exit 1) naming the promises that did not hold.
pub fn check(args: &super::CheckArgs, out: &mut dyn Write) -> Result<()> {
    let cfg = super::plan::check_config(args)?;
    restore_leftovers();
    let report =
        crate::check::run(&cfg).map_err(|e| match e.downcast::<crate::check::NotStarted>() {
            Ok(n) => UsageError(n.0).into(),
            Err(e) => e.context("the check failed"),
        })?;
    crate::check::write(&report, cfg.format, colour_on_stdout(), out)?;
    if let Some(path) = &cfg.json_file {
        write_file(path, serde_json::to_string_pretty(&report)?.as_bytes())?;
    }
    let _ = out.flush();
    let mut failed: Vec<String> = report
        .failed()
        .map(|f| format!("{} (CPU {})", f.promise.title(), f.cpu))
        .collect();
    if let Some(k) = &report.kubernetes {
        let mut broken: Vec<String> = k
            .breaches
            .iter()
            .map(|b| {
                let who =
                    crate::check::kube::owner_words(b.pod.as_deref(), &b.pod_uid, &b.container);
                format!("{who}'s exclusive CPU {}", b.cpu)
            })
            .collect();
        broken.dedup();
        failed.extend(broken);
    }
    if !failed.is_empty() {
        anyhow::bail!("isolation did not hold: {}", failed.join(", "));
    }
    Ok(())
}

/// Injected noise for a whole run, from threads kept off the measured CPUs when the machine
/// has others.
fn start_noise(specs: &[(NoiseKind, Cpu, u32)], plan: &RunPlan) -> NoiseSet {
    let mut cpus: Vec<Cpu> = vec![plan.workload.producer_cpu];
    cpus.extend(&plan.workload.consumer_cpus);
    let mut away = Topology::read().housekeeping(&cpus);
    if away.is_empty() {
        away = vec![plan.workload.producer_cpu];
    }
    NoiseSet::start(specs, &away)
}

/// `jitterscope floor`: the cross-core transfer floor, as the seed's block or as JSON.
/// `jitterscope watch`: the target checked first (a usage error when it is not there), then
/// the watch; the run file says how it ended.
pub fn watch(args: &WatchArgs, out: &mut dyn Write) -> Result<()> {
    let mut plan = super::plan::watch_plan(args)?;
    crate::session::watch::resolve_target(&mut plan).map_err(|e| {
        match e.downcast::<crate::session::watch::target::TargetError>() {
            Ok(t) => UsageError(t.0).into(),
            Err(e) => e,
        }
    })?;
    let found =
        crate::session::watch::check_target(&plan).map_err(|e| UsageError(e.to_string()))?;
    if let crate::session::watch::target::Target::Comm(pattern) = &plan.target {
        let names: Vec<String> = found
            .iter()
            .map(|f| format!("{}[{}] of process {}", f.comm, f.tid, f.pid))
            .collect();
        writeln!(out, "--comm {pattern} matched: {}", names.join(", "))?;
    }
    crate::session::watch::watch(plan, found, out).map_err(|e| {
        match e.downcast::<crate::session::watch::target::TargetError>() {
            Ok(t) => UsageError(t.0).into(),
            Err(e) if e.is::<Interrupted>() => e,
            Err(e) => e.context("the watch failed"),
        }
    })?;
    let _ = out.flush();
    Ok(())
}

pub fn floor(args: &FloorArgs, out: &mut dyn Write) -> Result<()> {
    let cfg = floor_config(args)?;
    let s = pingpong::floor(&cfg)?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&s)?)?;
    } else {
        let title = format!(
            "Cross-core transfer floor CPU {} <-> CPU {}, one way",
            cfg.timing_cpu, cfg.echo_cpu
        );
        write!(out, "{}", seed::block(&title, &s))?;
    }
    Ok(())
}

/// `jitterscope report`: a saved run rendered again, to `out` or to `--output`.
pub fn report(args: &ReportArgs, out: &mut dyn Write) -> Result<()> {
    let run = RunFile::read(&args.run_file)?;
    let rendered = if args.format == "text" && args.output.is_none() {
        text::render(&run, colour_on_stdout())
    } else {
        let exporter = export::by_name(&args.format)
            .ok_or_else(|| UsageError(format!("--format {}: unknown format", args.format)))?;
        exporter.render(&run)
    };
    match &args.output {
        Some(path) => write_file(path, rendered.as_bytes())?,
        None => write!(out, "{rendered}")?,
    }
    Ok(())
}

/// `jitterscope compare`: the runs side by side, and their percentile curves as SVG.
pub fn compare(args: &CompareArgs, out: &mut dyn Write) -> Result<()> {
    if args.run_files.iter().filter(|p| input::is_stdin(p)).count() > 1 {
        return Err(UsageError("compare: standard input (-) can be given once".into()).into());
    }
    let mut runs = Vec::new();
    for p in &args.run_files {
        if let Some(run_file) = traced_run(p, &args.run_files) {
            eprintln!(
                "note: skipped {}: it is the Perfetto trace of {}, not a run file",
                p.display(),
                run_file.display()
            );
            continue;
        }
        runs.push((p.display().to_string(), RunFile::read(p)?));
    }
    if runs.len() < 2 {
        return Err(UsageError(
            "compare: give two run files or more (a run's Perfetto trace is not one)".into(),
        )
        .into());
    }
    write!(out, "{}", comparison::render(&runs))?;
    if let Some(svg) = &args.svg {
        write_file(svg, comparison::chart(&runs).as_bytes())?;
    }
    Ok(())
}

/// The run file among `given` whose Perfetto trace `path` is (`NAME.trace.json` beside
/// `NAME.json`, as a run writes them), so that `compare a-*.json b-*.json` reads the runs.
fn traced_run<'a>(path: &Path, given: &'a [PathBuf]) -> Option<&'a PathBuf> {
    let name = path.to_str()?.strip_suffix(".trace.json")?;
    let run_file = format!("{name}.json");
    given.iter().find(|g| g.to_str() == Some(run_file.as_str()))
}

/// `jitterscope bench-engine`: the attribution engine's throughput as one JSON line, with
/// this process's peak memory (for scripts/bench.sh).
pub fn bench_engine(records: u64, out: &mut dyn Write) -> Result<()> {
    let t = crate::attribution::throughput::measure(records);
    let json = serde_json::json!({
        "records": t.records, "stalls": t.stalls, "seconds": t.seconds,
        "records_per_second": t.records_per_second,
        "peak_retained": t.peak_retained, "peak_rss_kib": peak_rss_kib(),
    });
    writeln!(out, "{json}")?;
    Ok(())
}

/// VmHWM from /proc/self/status, 0 when it cannot be read.
fn peak_rss_kib() -> u64 {
    input::read_proc("/proc/self/status", input::PROC_FILE)
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0)
}

/// `jitterscope completions`: the shell's completion script.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<()> {
    clap_complete::generate(shell, &mut Cli::command(), "jitterscope", out);
    Ok(())
}
