//! From clap's flags to the plain values each command takes: CPU lists checked against the
//! machine, the output directory prepared, the record rings' size rounded, the automatic stall
//! threshold measured. Every problem found here is a `UsageError` (exit 2); the modules below
//! never see the flags.

use std::io::IsTerminal;

use super::{
    parse_cpu_list, parse_cpus, AttachOrder, Attribution, FloorArgs, NoiseArgs, ProbeArgs, RunArgs,
    Threshold, TuneArgs, UsageError, VerifyArgs, WatchArgs, WorkshopArgs,
};
use crate::model::{Decision, Nanos};
use crate::probe::census::CensusConfig;
use crate::probe::Reference;
use crate::report::files::OutputDir;
use crate::report::metrics::MetricsPlan;
use crate::session::watch::target::Target;
use crate::session::watch::{default_proc, WatchPlan};
use crate::session::RunPlan;
use crate::system::cpus::Topology;
use crate::system::hold::TuneRequest;
use crate::units::format_list;
use crate::verify::compare::FirstAttached;
use crate::verify::{CheckRequest, PerfSource, Swapped, Tolerances, VerifyRequest};
use crate::workload::pingpong::FloorConfig;
use crate::workload::{auto_stall_threshold_ns, WorkloadConfig};
use crate::workshop::noise::InjectionConfig;
use crate::workshop::steps::Step;
use crate::workshop::WorkshopConfig;

/// ANSI colour on standard output: it is a terminal and `NO_COLOR` is not set.
pub fn colour_on_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// `--ringbuf-size` as the kernel takes it (a power of two), saying so when it was rounded.
/// `watch`'s flags: the target (one of --pid, --tid, --comm, --cgroup, --container, --
/// COMMAND; clap refuses two), the CPUs that count, the output directory.
pub fn watch_plan(args: &WatchArgs) -> Result<WatchPlan, UsageError> {
    let topo = Topology::read();
    let target = if let Some(pid) = args.pid {
        Target::Pid(pid)
    } else if !args.tid.is_empty() {
        Target::Tids(args.tid.clone())
    } else if let Some(comm) = &args.comm {
        Target::Comm(comm.clone())
    } else if let Some(path) = &args.cgroup {
        Target::Cgroup {
            path: path.clone(),
            container: None,
        }
    } else if let Some(asked) = &args.container {
        Target::Container(asked.clone())
    } else if !args.command.is_empty() {
        Target::Command(args.command.clone())
    } else {
        return Err(UsageError(
            "watch: say what to watch: --pid PID, --tid TID[,TID…], --comm NAME, --cgroup PATH, --container NAME|ID or -- COMMAND"
                .into(),
        ));
    };
    let cpus = match &args.cpus {
        Some(text) => parse_cpu_list(text, &topo, 1)?,
        None => topo.online.clone(),
    };
    let metrics = metrics_plan(
        args.session.metrics.as_deref(),
        args.session.metrics_interval,
    )?;
    let output = OutputDir::prepare(&args.session.output).map_err(|e| UsageError(e.to_string()))?;
    Ok(WatchPlan {
        target,
        cpus,
        duration_ns: args.duration,
        label: args.session.label.clone(),
        output,
        keep_stalls: args.session.keep_stalls as usize,
        progress: true,
        tui: !args.session.no_tui && std::io::stdout().is_terminal(),
        colour: colour_on_stdout(),
        ringbuf_bytes: ringbuf_bytes(args.session.ringbuf_size.unwrap_or(WATCH_RINGBUF_BYTES)),
        proc_root: default_proc().to_path_buf(),
        metrics,
    })
}

/// `--metrics FILE` and `--metrics-interval`: the file's directory must exist and take
/// files; a name node_exporter's textfile collector would not read is said once.
pub fn metrics_plan(
    path: Option<&std::path::Path>,
    interval_ns: crate::model::Nanos,
) -> Result<Option<MetricsPlan>, UsageError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let plan = MetricsPlan::check(path, interval_ns).map_err(|e| UsageError(e.to_string()))?;
    if !plan.collector_reads_it() {
        eprintln!(
            "note: --metrics {}: node_exporter's textfile collector reads only files ending in .prom",
            path.display()
        );
    }
    Ok(Some(plan))
}

/// A run's rings by default: each measured CPU's takes every record of its CPU.
pub const RUN_RINGBUF_BYTES: u64 = 8 << 20;
/// A watch's rings by default: the kernel keeps only what can matter to the watched threads,
/// a quarter of a run's holds some 21,000 records a CPU, and an always-on watch keeps its
/// memory (the rings are mapped whole) near that of the exporters it runs beside.
pub const WATCH_RINGBUF_BYTES: u64 = 2 << 20;

pub fn ringbuf_bytes(requested: u64) -> u32 {
    let (bytes, rounded) = crate::probe::ringbuf_size(requested);
    if rounded {
        eprintln!("note: --ringbuf-size {requested} rounded up to {bytes} (a power of two)");
    }
    bytes
}

/// When a run decides its culprits: as asked, or for `auto` as `session::decision_by_default`
/// says. The one place `--attribution` becomes a `Decision`.
pub fn decision(
    asked: Attribution,
    probes: bool,
    metrics: bool,
    every_cpu_measured: bool,
    duration_ns: Nanos,
) -> Decision {
    match asked {
        Attribution::Live => Decision::Live,
        Attribution::End => Decision::AtEnd {
            chosen_by_default: false,
        },
        Attribution::Auto => {
            crate::session::decision_by_default(probes, metrics, every_cpu_measured, duration_ns)
        }
    }
}

/// `jitterscope run`'s flags as a checked plan.
pub fn run_plan(args: &RunArgs) -> Result<RunPlan, UsageError> {
    let Some(cpus_text) = &args.cpus else {
        return Err(UsageError(
            "--cpus is required: give the producer's CPU then one or more consumer CPUs, e.g. --cpus 1,3".into(),
        ));
    };
    let mut topo = Topology::read();
    if parse_cpus(cpus_text, &topo).is_err() && crate::system::actions::leave_shield() {
        eprintln!(
            "note: left the cpuset {} (a `tune --shield` holds it) for the cpuset root: the run's threads need CPU {cpus_text}",
            crate::system::actions::SHIELD_NAME
        );
        topo = Topology::read();
    }
    let cpus = parse_cpus(cpus_text, &topo)?;
    let metrics = metrics_plan(
        args.session.metrics.as_deref(),
        args.session.metrics_interval,
    )?;
    let decision = decision(
        args.attribution,
        !args.no_probes,
        metrics.is_some(),
        topo.housekeeping(&cpus).is_empty(),
        args.duration,
    );
    if args.attribution == Attribution::End {
        if args.no_probes {
            return Err(UsageError(
                "--attribution end with --no-probes: without probes nothing is attributed; drop one of them".into(),
            ));
        }
        if metrics.is_some() {
            return Err(UsageError(
                "--attribution end with --metrics: the metrics file is rewritten while the run goes on, and its culprit series would stay empty until the end; use --attribution live (the default) to export metrics".into(),
            ));
        }
    }
    let output = OutputDir::prepare(&args.session.output).map_err(|e| UsageError(e.to_string()))?;
    let (threshold, auto) = match args.stall_threshold {
        Threshold::Auto => (auto_stall_threshold_ns(), true),
        Threshold::Fixed(ns) => (ns, false),
    };
    let probes = (!args.no_probes)
        .then(|| ringbuf_bytes(args.session.ringbuf_size.unwrap_or(RUN_RINGBUF_BYTES)));
    let mut workload = WorkloadConfig::new(cpus[0], cpus[1..].to_vec());
    workload.pin = !args.no_pin;
    workload.consumer_fifo = args.fifo;
    workload.interval_ns = args.interval;
    workload.warmup_ns = args.warmup;
    workload.duration_ns = args.duration;
    workload.stall_threshold_ns = threshold;
    workload.spike_threshold_ns = args.spike_threshold;
    if decision.at_end() {
        workload.hold_for_the_end();
    }
    Ok(RunPlan {
        workload,
        label: args.session.label.clone(),
        output,
        stall_threshold_auto: auto,
        keep_stalls: args.session.keep_stalls as usize,
        progress: true,
        tui: !args.session.no_tui && std::io::stdout().is_terminal(),
        colour: colour_on_stdout(),
        probes,
        metrics,
        decision,
    })
}

/// `jitterscope probe`: at least one CPU; the drain thread goes to the others.
pub fn census_config(args: &ProbeArgs) -> Result<CensusConfig, UsageError> {
    let topo = Topology::read();
    let cpus = parse_cpu_list(&args.cpus, &topo, 1)?;
    let ringbuf_bytes = ringbuf_bytes(args.ringbuf_size);
    Ok(CensusConfig {
        drain_cpus: topo.housekeeping(&cpus),
        cpus,
        duration_ns: args.duration,
        ringbuf_bytes,
        log: !args.no_log,
        json: args.json,
        words: crate::report::culprit::words_of,
        floor: if args.floor_first {
            Reference::BeforeProbes
        } else if args.floor {
            Reference::AfterProbes
        } else {
            Reference::Off
        },
    })
}

/// `jitterscope floor`: exactly two CPUs.
pub fn floor_config(args: &FloorArgs) -> Result<FloorConfig, UsageError> {
    let cpus = parse_cpus(&args.cpus, &Topology::read())?;
    let [timing_cpu, echo_cpu] = cpus[..] else {
        return Err(UsageError(format!(
            "--cpus {}: floor measures between exactly two CPUs, e.g. --cpus 0,1",
            args.cpus
        )));
    };
    Ok(FloorConfig {
        timing_cpu,
        echo_cpu,
        rounds: args.rounds,
    })
}

/// `jitterscope noise`: exactly one CPU.
pub fn injection_config(args: &NoiseArgs) -> Result<InjectionConfig, UsageError> {
    let cpus = parse_cpu_list(&args.cpu, &Topology::read(), 1)?;
    let [cpu] = cpus[..] else {
        return Err(UsageError(format!(
            "--cpu {}: give one CPU, e.g. --cpu 1",
            args.cpu
        )));
    };
    Ok(InjectionConfig {
        kind: args.kind,
        cpu,
        rate: args.rate,
        duration_ns: args.duration,
        log: args.log.clone(),
    })
}

/// `jitterscope tune`: CPUs that leave at least one for the rest of the system, and at least
/// one action.
pub fn tune_request(args: &TuneArgs) -> Result<TuneRequest, UsageError> {
    let topo = Topology::read();
    let cpus = parse_cpu_list(&args.cpus, &topo, 1)?;
    let others = topo.housekeeping(&cpus);
    if others.is_empty() {
        return Err(UsageError(format!(
            "--cpus {}: every CPU would be cleared; leave at least one for the rest of the system (online: {})",
            args.cpus,
            format_list(&topo.online)
        )));
    }
    if !(args.irqs
        || args.kworkers
        || args.shield
        || args.stat_interval.is_some()
        || args.governor.is_some())
    {
        return Err(UsageError(
            "nothing to tune: give --irqs, --kworkers, --shield, --stat-interval or --governor"
                .into(),
        ));
    }
    Ok(TuneRequest {
        cpus,
        cpus_text: args.cpus.clone(),
        others,
        irqs: args.irqs,
        kworkers: args.kworkers,
        shield: args.shield,
        stat_interval_s: args.stat_interval,
        governor: args.governor.clone(),
        hold_ns: args.hold,
    })
}

/// `jitterscope workshop`: a producer and a consumer CPU, a writable output directory.
pub fn workshop_config(args: &WorkshopArgs) -> Result<WorkshopConfig, UsageError> {
    let cpus = parse_cpus(&args.cpus, &Topology::read())?;
    let [producer_cpu, consumer_cpu] = cpus[..] else {
        return Err(UsageError(format!(
            "--cpus {}: the workshop uses one producer and one consumer CPU, e.g. --cpus 1,3",
            args.cpus
        )));
    };
    if !args.after_reboot.is_empty() && args.step != Some(Step::Boot) {
        return Err(UsageError(format!(
            "--after-reboot compares runs of the BOOT step: give --step boot too, e.g. sudo jitterscope workshop --cpus {} --step boot --after-reboot {}",
            args.cpus,
            args.after_reboot[0].display()
        )));
    }
    let output = OutputDir::prepare(&args.output).map_err(|e| UsageError(e.to_string()))?;
    Ok(WorkshopConfig {
        producer_cpu,
        consumer_cpu,
        step: args.step,
        duration_ns: args.duration,
        output,
        after_reboot: args.after_reboot.clone(),
    })
}

/// `jitterscope verify`: the tracepoint list, or a check, which needs both files.
pub fn verify_request(args: &VerifyArgs) -> Result<VerifyRequest, UsageError> {
    if args.print_perf_events {
        return Ok(VerifyRequest::PrintPerfEvents);
    }
    let (Some(run_file), Some(perf_script)) = (&args.run_file, &args.perf_script) else {
        return Err(UsageError(
            "--run and --perf-script are both required".into(),
        ));
    };
    let source = |path: &std::path::PathBuf| match path.as_os_str() == "-" {
        true => PerfSource::Stdin,
        false => PerfSource::File(path.clone()),
    };
    let perf_script = source(perf_script);
    let first = match args.order {
        AttachOrder::PerfFirst => FirstAttached::Perf,
        AttachOrder::JitterscopeFirst => FirstAttached::Jitterscope,
    };
    let swapped = match (&args.swapped_run, &args.swapped_perf_script) {
        (Some(run), Some(perf)) => {
            let other = source(perf);
            if other == PerfSource::Stdin && perf_script == PerfSource::Stdin {
                return Err(UsageError(
                    "--perf-script - and --swapped-perf-script -: only one of the two recordings' perf events can come from standard input; give the other as a file".into(),
                ));
            }
            Some(Swapped {
                run_file: run.clone(),
                perf_script: other,
                perf_first: first == FirstAttached::Perf,
            })
        }
        _ => None,
    };
    Ok(VerifyRequest::Check(Box::new(CheckRequest {
        run_file: run_file.clone(),
        perf_script,
        cpu: args.cpu,
        wakeups: args.wakeups,
        tolerances: Tolerances {
            floor_ns: args.floor,
            wakeup_total: args.wakeup_tolerance,
            first: (args.wakeups.is_none()).then_some(first),
            ..Tolerances::default()
        },
        all: args.all,
        swapped,
    })))
}

/// `jitterscope check`: CPUs given, a SCHED_FIFO spinner only where RT throttling leaves the
/// CPU's kernel threads their share, a process that exists.
pub fn check_config(args: &super::CheckArgs) -> Result<crate::check::CheckConfig, UsageError> {
    use crate::check::{Format, Target};
    // The CPUs need not be this process's: its spinners move to the cpuset that holds them
    // (a check runs under a shield as often as not).
    let mut topo = Topology::read();
    topo.allowed = topo.online.clone();
    let kubelet = kubelet_of(args)?;
    let cpus = match (&args.cpus, &kubelet) {
        (Some(text), _) => parse_cpu_list(text, &topo, 1)?,
        (None, Some(k)) => {
            let exclusive = k.state.exclusive_cpus();
            if exclusive.is_empty() {
                return Err(UsageError(format!(
                    "{}: policy {}: no container has CPUs of its own, so there are none to check; give --cpus",
                    k.file.display(),
                    k.state.policy
                )));
            }
            parse_cpu_list(&crate::units::format_list(&exclusive), &topo, 1).map_err(|e| {
                UsageError(format!("the exclusive CPUs of {}: {}", k.file.display(), e.0))
            })?
        }
        (None, None) => {
            return Err(UsageError(format!(
                "--cpus: no CPUs given, and no kubelet CPU manager checkpoint ({}) to take them from; e.g. --cpus 2,3",
                crate::system::kubelet::STATE_FILE
            )))
        }
    };
    let target = match (&args.pid, args.command.is_empty()) {
        (Some(pid), _) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(UsageError(format!(
                    "--pid {pid}: no such process (is it running? `pidof` gives the pid)"
                )));
            }
            Target::Pid(*pid)
        }
        (None, false) => Target::Command(args.command.clone()),
        (None, true) => Target::Spinners { fifo: args.fifo },
    };
    if args.fifo {
        let runtime = crate::platform::input::read_proc(
            "/proc/sys/kernel/sched_rt_runtime_us",
            crate::platform::input::PROC_FILE,
        )
        .unwrap_or_default();
        if runtime.trim() == "-1" {
            return Err(UsageError("--fifo: RT throttling is off here (kernel.sched_rt_runtime_us=-1), so a SCHED_FIFO spinner would starve the CPUs' own kernel threads; check your own real-time thread with --pid instead".into()));
        }
    }
    Ok(crate::check::CheckConfig {
        cpus,
        duration_ns: args.duration,
        target,
        format: match args.format.as_str() {
            "json" => Format::Json,
            "markdown" => Format::Markdown,
            _ => Format::Text,
        },
        ringbuf_bytes: ringbuf_bytes(args.ringbuf_size),
        json_file: args.json.clone(),
        kubelet,
    })
}

/// The kubelet's CPU manager checkpoint of `check`: the file given (a usage error when it
/// cannot be used), else the kubelet's own where it exists (said and left out when it cannot
/// be used and --cpus says what to check).
fn kubelet_of(args: &super::CheckArgs) -> Result<Option<crate::check::kube::Kubelet>, UsageError> {
    use crate::system::kubelet::{pod_names, CpuManagerState, POD_LOGS, STATE_FILE};
    let (file, given) = match &args.kubelet_state {
        Some(f) => (f.clone(), true),
        None if std::path::Path::new(STATE_FILE).exists() => {
            (std::path::PathBuf::from(STATE_FILE), false)
        }
        None => return Ok(None),
    };
    let state = match CpuManagerState::read(&file) {
        Ok(s) => s,
        Err(e) if given || args.cpus.is_none() => {
            return Err(UsageError(format!("--kubelet-state: {e}")))
        }
        Err(e) => {
            eprintln!("note: {e}; checking --cpus without it");
            return Ok(None);
        }
    };
    Ok(Some(crate::check::kube::Kubelet {
        file,
        state,
        pod_names: pod_names(std::path::Path::new(POD_LOGS)),
    }))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn probe_floor(flags: &[&str]) -> Reference {
        let argv = ["jitterscope", "probe", "--cpus", "0"].iter().chain(flags);
        let Some(Command::Probe(args)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not the probe command: {flags:?}");
        };
        census_config(&args).unwrap().floor
    }

    /// The consumers' SCHED_FIFO priority a `run` with `flags` plans.
    fn consumer_fifo(flags: &[&str]) -> Result<Option<u8>, String> {
        let out = tempfile::tempdir().unwrap();
        let out = out.path().to_str().unwrap();
        let head = ["jitterscope", "run", "--cpus", "0,1", "--output", out];
        let argv = head.iter().chain(flags);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Some(Command::Run(args)) = cli.command else {
            panic!("not the run command: {flags:?}");
        };
        Ok(run_plan(&args).map_err(|e| e.0)?.workload.consumer_fifo)
    }

    #[test]
    fn fifo_makes_the_consumers_sched_fifo_at_50_or_the_priority_given() {
        assert_eq!(consumer_fifo(&[]), Ok(None));
        assert_eq!(consumer_fifo(&["--fifo"]), Ok(Some(50)));
        assert_eq!(consumer_fifo(&["--fifo", "70"]), Ok(Some(70)));
        assert_eq!(consumer_fifo(&["--fifo=1"]), Ok(Some(1)));
        for bad in ["0", "100"] {
            let e = consumer_fifo(&["--fifo", bad]).unwrap_err();
            assert!(e.contains("--fifo") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn the_reference_programs_are_asked_for_after_or_before_the_probes() {
        assert_eq!(probe_floor(&[]), Reference::Off);
        assert_eq!(probe_floor(&["--floor"]), Reference::AfterProbes);
        assert_eq!(probe_floor(&["--floor-first"]), Reference::BeforeProbes);
        // --floor-first says where the floor runs: given with --floor, it still decides.
        assert_eq!(
            probe_floor(&["--floor", "--floor-first"]),
            Reference::BeforeProbes
        );
    }

    #[test]
    fn by_default_culprits_wait_for_the_end_only_where_jitterscope_must_share_the_cpus() {
        use Attribution::{Auto, End, Live};
        const S: Nanos = 1_000_000_000;
        // (probes, metrics, every CPU measured, duration)
        let cases = [
            (true, false, true, 10 * S),
            (true, false, true, 60 * S),
            (true, false, false, 10 * S),
            (true, true, true, 10 * S),
            (false, false, true, 10 * S),
            // Longer than the rings hold a quiet run: it would decide in bursts before the end.
            (true, false, true, 60 * S + 1),
        ];
        let auto: Vec<Decision> = (cases.iter())
            .map(|&(p, m, all, d)| decision(Auto, p, m, all, d))
            .collect();
        let chosen = Decision::AtEnd {
            chosen_by_default: true,
        };
        use Decision::Live as L;
        assert_eq!(auto, [chosen, chosen, L, L, L, L]);
        // Asked for, either way is kept (what cannot serve is refused before this).
        for (p, m, all, d) in cases {
            let asked = Decision::AtEnd {
                chosen_by_default: false,
            };
            assert_eq!(decision(End, p, m, all, d), asked);
            assert_eq!(decision(Live, p, m, all, d), Decision::Live);
        }
        // Unsaid, it is `auto`.
        let Some(Command::Run(args)) = Cli::try_parse_from(["jitterscope", "run", "--cpus", "0,1"])
            .unwrap()
            .command
        else {
            panic!("not the run command");
        };
        assert_eq!(args.attribution, Auto);
    }
}
