//! One run, wired end to end: start the workload, drain it while it runs (stalls, interval
//! histograms into the .hlog), then print the report and write the run files.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use crate::model::{Cpu, Nanos};
use crate::report::files::{file_stem, utc_stamp, OutputDir};
use crate::report::hlog::HlogWriter;
use crate::report::runfile::{
    ConsumerHistograms, Lost, RunFile, RunInfo, Settings, StallEntry, SCHEMA,
};
use crate::report::seed::Summary;
use crate::report::stalls::StallBook;
use crate::report::text;
use crate::report::units::fmt_ns;
use crate::report::{export, hgrm};
use crate::signals;
use crate::system::cpus::{format_list, Topology};
use crate::workload::clock::{monotonic_ns, unix_ns};
use crate::workload::histograms::{new_histogram, IntervalHistograms};
use crate::workload::{affinity, Output, Workload, WorkloadConfig};

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub workload: WorkloadConfig,
    pub label: String,
    pub output: OutputDir,
    pub stall_threshold_auto: bool,
    pub keep_stalls: usize,
    /// Print one progress line per second.
    pub progress: bool,
    /// ANSI colour in the report (stdout is a terminal).
    pub colour: bool,
}

/// Where the run's files went.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run: RunFile,
    pub json_path: std::path::PathBuf,
    pub hgrm_paths: Vec<std::path::PathBuf>,
    pub hlog_path: std::path::PathBuf,
}

fn consumer_key(index: usize) -> String {
    crate::model::ThreadRole::Consumer(index as u32).display_name()
}

struct ConsumerTotals {
    transit: Histogram<u64>,
    inter_message: Histogram<u64>,
    /// The latest finished interval, for the progress line.
    last_transit: Option<Summary>,
    last_messages: u64,
    last_interval_ns: Nanos,
}

pub fn run(plan: RunPlan, out: &mut dyn Write) -> Result<RunOutcome> {
    signals::install();
    let cfg = plan.workload.clone();
    let measured: Vec<Cpu> = std::iter::once(cfg.producer_cpu)
        .chain(cfg.consumer_cpus.iter().copied())
        .collect();
    let topo = Topology::read();
    let housekeeping = topo.housekeeping(&measured);
    if cfg.pin {
        if housekeeping.is_empty() {
            writeln!(
                out,
                "note: every CPU is measured ({}); jitterscope's own collector shares them (it sleeps 100 ms between drains)",
                format_list(&measured)
            )?;
        } else {
            // The collector (this thread) stays off the measured CPUs.
            affinity::set_current_thread_cpus(&housekeeping)
                .context("cannot move jitterscope's collector thread to the housekeeping CPUs")?;
        }
    }

    let start_unix = unix_ns() as u64;
    let base_mono = monotonic_ns();
    let stem = format!("{}-{}", file_stem(&plan.label), utc_stamp(start_unix));
    let (hlog_path, hlog_file) = plan.output.create_stream(&format!("{stem}.hlog"))?;
    let mut hlog = HlogWriter::new(
        hlog_path.clone(),
        hlog_file,
        start_unix,
        &format!(
            "jitterscope {} run '{}' cpus {}",
            env!("CARGO_PKG_VERSION"),
            plan.label,
            format_list(&measured)
        ),
    )
    .with_context(|| format!("cannot write {}", hlog_path.display()))?;

    let mut workload = Workload::start(cfg.clone())?;
    let record_from = workload.record_from_ns();
    let end = workload.end_ns();
    writeln!(
        out,
        "jitterscope: producer on CPU {}, consumer{} on CPU {}{}; interval {}, warm-up {}, duration {}, stall threshold {}{}",
        cfg.producer_cpu,
        if cfg.consumer_cpus.len() > 1 { "s" } else { "" },
        format_list(&cfg.consumer_cpus),
        if cfg.pin { "" } else { " (unpinned)" },
        fmt_ns(cfg.interval_ns),
        fmt_ns(cfg.warmup_ns),
        fmt_ns(cfg.duration_ns),
        fmt_ns(cfg.stall_threshold_ns),
        if plan.stall_threshold_auto { " (auto)" } else { "" },
    )?;
    let tids: Vec<String> = workload
        .threads()
        .iter()
        .map(|t| format!("{}={}", t.name, t.tid))
        .collect();
    writeln!(out, "threads: {}", tids.join(" "))?;
    out.flush()?;

    let mut totals: Vec<ConsumerTotals> = cfg
        .consumer_cpus
        .iter()
        .map(|_| ConsumerTotals {
            transit: new_histogram(),
            inter_message: new_histogram(),
            last_transit: None,
            last_messages: 0,
            last_interval_ns: 0,
        })
        .collect();
    let mut stalls = StallBook::new(plan.keep_stalls);
    let mut hlog_error: Option<std::io::Error> = None;
    let mut drain = |workload: &mut Workload,
                     totals: &mut Vec<ConsumerTotals>,
                     stalls: &mut StallBook,
                     hlog: &mut HlogWriter| {
        workload.drain(|o| match o {
            Output::Stall(s) => {
                stalls.add(s);
                None
            }
            Output::Interval { consumer, hists } => {
                let t = &mut totals[consumer];
                // Same bounds everywhere, so adding cannot fail.
                let _ = t.transit.add(&hists.transit);
                let _ = t.inter_message.add(&hists.inter_message);
                t.last_transit = Some(Summary::of(&hists.transit));
                t.last_messages = hists.transit.len();
                t.last_interval_ns = hists.end_ns.saturating_sub(hists.start_ns);
                write_interval(hlog, consumer, &hists, base_mono, &mut hlog_error);
                Some(hists)
            }
        });
    };

    let mut next_progress = record_from + 1_000_000_000;
    let mut ended = "completed";
    while !workload.finished() {
        std::thread::sleep(Duration::from_millis(100));
        drain(&mut workload, &mut totals, &mut stalls, &mut hlog);
        if let Some(sig) = signals::received() {
            writeln!(
                out,
                "{}: stopping early, writing what was measured",
                signals::name(sig)
            )?;
            workload.request_stop();
            ended = "interrupted";
            break;
        }
        let now = monotonic_ns();
        if plan.progress && now >= next_progress && now < end {
            next_progress += 1_000_000_000;
            writeln!(
                out,
                "{}",
                progress_line(now, record_from, end, &totals, &stalls)
            )?;
            out.flush()?;
        }
    }
    workload.join();
    drain(&mut workload, &mut totals, &mut stalls, &mut hlog);
    let _ = hlog.flush();
    let stop_ns = monotonic_ns().min(end);

    let counters = workload.counters();
    let sum = |f: &dyn Fn(&crate::workload::ThreadCounters) -> u64| -> u64 {
        counters.iter().map(|(_, c)| f(c)).sum()
    };
    use std::sync::atomic::Ordering::Relaxed;
    let lost = Lost {
        ring_buffer_drops: 0,
        workload_queue_drops: sum(&|c| c.stalls_dropped.load(Relaxed)),
        sequence_errors: sum(&|c| c.sequence_errors.load(Relaxed)),
    };
    let ring_full = sum(&|c| c.ring_full.load(Relaxed));

    let run = RunFile {
        schema: SCHEMA.to_string(),
        run: RunInfo {
            label: plan.label.clone(),
            cpus: measured.clone(),
            producer_cpu: cfg.producer_cpu,
            consumer_cpus: cfg.consumer_cpus.clone(),
            start_unix_ns: start_unix,
            record_from_ns: record_from,
            duration_ns: stop_ns.saturating_sub(record_from),
            kernel: crate::system::kernel_release(),
            host: crate::system::host_name(),
            ended: ended.to_string(),
            settings: Settings {
                pinned: cfg.pin,
                interval_ns: cfg.interval_ns,
                warmup_ns: cfg.warmup_ns,
                planned_duration_ns: cfg.duration_ns,
                stall_threshold_ns: cfg.stall_threshold_ns,
                stall_threshold_auto: plan.stall_threshold_auto,
                probes: false,
            },
        },
        histograms: totals
            .iter()
            .enumerate()
            .map(|(i, t)| ConsumerHistograms {
                consumer: consumer_key(i),
                cpu: cfg.consumer_cpus[i],
                transit: Summary::of(&t.transit),
                inter_message: Summary::of(&t.inter_message),
            })
            .collect(),
        stall_summary: stalls.summary(),
        stalls: stalls
            .worst()
            .into_iter()
            .map(|s| StallEntry {
                cpu: s.cpu,
                thread: s.thread.display_name(),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                duration_ns: s.duration_ns(),
                explained_share: None,
                culprits: Vec::new(),
                incomplete: false,
                timeline: Vec::new(),
            })
            .collect(),
        culprits: Vec::new(),
        lost,
    };

    write!(out, "\n{}", text::render(&run, plan.colour))?;
    if ring_full > 0 {
        writeln!(
            out,
            "note: the producer found the ring full {ring_full} times (a consumer fell a whole ring behind); those publishes were delayed, not lost"
        )?;
    }
    if let Some(e) = hlog_error {
        writeln!(
            out,
            "WARNING: the interval log {} is incomplete: {e}",
            hlog_path.display()
        )?;
    }

    let mut hgrm_paths = Vec::new();
    for (i, t) in totals.iter().enumerate() {
        for (kind, h) in [("transit", &t.transit), ("inter_message", &t.inter_message)] {
            let name = format!("{stem}.{}.{kind}.hgrm", consumer_key(i));
            hgrm_paths.push(
                plan.output
                    .write(&name, hgrm::percentile_distribution(h, 1000.0).as_bytes())?,
            );
        }
    }
    let mut written = Vec::new();
    for e in export::run_files() {
        written.push(
            plan.output
                .write(&format!("{stem}{}", e.suffix()), e.render(&run).as_bytes())?,
        );
    }
    let json_path = written.last().cloned().unwrap_or_default();
    writeln!(out, "\nrun file:     {}", json_path.display())?;
    for p in &written[..written.len() - 1] {
        writeln!(out, "              {}", p.display())?;
    }
    for p in &hgrm_paths {
        writeln!(out, "              {} (HdrHistogram, µs)", p.display())?;
    }
    writeln!(out, "              {} (interval log)", hlog_path.display())?;
    Ok(RunOutcome {
        run,
        json_path,
        hgrm_paths,
        hlog_path,
    })
}

fn write_interval(
    hlog: &mut HlogWriter,
    consumer: usize,
    h: &IntervalHistograms,
    base_mono: Nanos,
    error: &mut Option<std::io::Error>,
) {
    if error.is_some() || h.transit.is_empty() {
        return;
    }
    let offset = h.start_ns.saturating_sub(base_mono);
    let length = h.end_ns.saturating_sub(h.start_ns);
    let key = consumer_key(consumer);
    for (kind, hist) in [("transit", &h.transit), ("inter_message", &h.inter_message)] {
        if let Err(e) = hlog.write(&format!("{key}.{kind}"), hist, offset, length) {
            *error = Some(e);
            return;
        }
    }
}

fn progress_line(
    now: Nanos,
    record_from: Nanos,
    end: Nanos,
    totals: &[ConsumerTotals],
    stalls: &StallBook,
) -> String {
    let elapsed = now.saturating_sub(record_from) as f64 / 1e9;
    let planned = end.saturating_sub(record_from) as f64 / 1e9;
    let mut line = format!("[{elapsed:6.1}s/{planned:.0}s]");
    for (i, t) in totals.iter().enumerate() {
        if let Some(s) = &t.last_transit {
            let rate = if t.last_interval_ns > 0 {
                t.last_messages as f64 * 1e9 / t.last_interval_ns as f64
            } else {
                0.0
            };
            line.push_str(&format!(
                " {}: {:.1}k msg/s transit p50 {} p99 {} max {} |",
                consumer_key(i),
                rate / 1e3,
                fmt_ns(s.percentile("50").unwrap_or(0)),
                fmt_ns(s.percentile("99").unwrap_or(0)),
                fmt_ns(s.max)
            ));
        }
    }
    line.push_str(&format!(
        " stalls {} (longest {})",
        stalls.count(),
        fmt_ns(stalls.longest_ns())
    ));
    line
}
