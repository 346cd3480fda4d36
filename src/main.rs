//! `jitterscope`: parse, run, print `Error: …` with the whole cause chain. Exit codes:
//! 0 success, 1 runtime failure (also a run whose CPU was taken away or whose files could
//! not be written), 2 usage error (also clap's own), 128+N when signal N (SIGHUP 1, SIGINT 2,
//! SIGTERM 15) ended a run or workshop early — its files are written and marked
//! `interrupted`. For `tune --hold`, `probe` and `noise` a signal is the ordinary way to end
//! early: they exit 0.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};

use jitterscope::cli::{
    parse_cpu_list, parse_cpus, plan, Cli, Command, FloorArgs, NoiseArgs, ReportArgs, RunArgs,
    UsageError, VerifyArgs, WorkshopArgs,
};
use jitterscope::probe::census;
use jitterscope::report::export;
use jitterscope::report::files::{write_file, OutputDir};
use jitterscope::report::runfile::RunFile;
use jitterscope::session::{self, RunPlan};
use jitterscope::system::cpus::Topology;
use jitterscope::system::{hold, tuning};
use jitterscope::workload::{auto_stall_threshold_ns, WorkloadConfig};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands that poll for SIGINT/SIGTERM/SIGHUP get their handlers first thing, so a
    // signal during start-up (probe loading, the loop-period measurement) is handled like one
    // later on. The others (`floor`, `report` …) keep the default action: Ctrl-C ends them.
    let ends_on_signal = matches!(
        cli.command,
        None | Some(Command::Run(_)) | Some(Command::Workshop(_))
    );
    if ends_on_signal
        || matches!(
            cli.command,
            Some(Command::Probe(_)) | Some(Command::Noise(_)) | Some(Command::Tune(_))
        )
    {
        jitterscope::signals::install();
    }
    match run(cli) {
        Ok(()) => match jitterscope::signals::received() {
            Some(sig) if ends_on_signal => ExitCode::from(jitterscope::signals::exit_code(sig)),
            _ => ExitCode::SUCCESS,
        },
        Err(e) => {
            if let Some(u) = e.downcast_ref::<UsageError>() {
                eprintln!("error: {u}");
                ExitCode::from(2)
            } else if let Some(i) = e.downcast_ref::<jitterscope::signals::Interrupted>() {
                eprintln!("{i}");
                ExitCode::from(jitterscope::signals::exit_code(i.0))
            } else {
                eprintln!("Error: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        None => run_workload(cli.run),
        Some(Command::Run(args)) => run_workload(args),
        Some(Command::Report(args)) => {
            let run = RunFile::read(&args.run_file)?;
            report(&run, &args)
        }
        Some(Command::Floor(args)) => floor(args),
        Some(Command::Compare(args)) => {
            let mut runs = Vec::new();
            for p in &args.run_files {
                runs.push((p.display().to_string(), RunFile::read(p)?));
            }
            print!("{}", jitterscope::report::compare::render(&runs));
            if let Some(svg) = &args.svg {
                write_file(svg, jitterscope::report::compare::chart(&runs).as_bytes())?;
            }
            Ok(())
        }
        Some(Command::Probe(args)) => {
            census::run(&plan::census_config(&args)?, &mut std::io::stdout().lock())
        }
        Some(Command::Noise(args)) => noise(args),
        Some(Command::Tune(args)) => {
            hold::apply_and_hold(&plan::tune_request(&args)?, &mut std::io::stdout().lock())
        }
        Some(Command::Workshop(args)) => workshop(args),
        Some(Command::Restore) => tuning::restore_command(&mut std::io::stdout().lock()),
        Some(Command::Verify(args)) => verify(args),
        Some(Command::NoiseTask { cpu, rate }) => jitterscope::workshop::noise::run_task(cpu, rate),
        Some(Command::NoiseTimer { cpu, rate }) => {
            jitterscope::workshop::noise::run_timer(cpu, rate)
        }
        Some(Command::BenchEngine { records }) => {
            let t = jitterscope::attribution::throughput::measure(records);
            let rss_kib = std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                })
                .unwrap_or(0);
            println!(
                "{}",
                serde_json::json!({
                    "records": t.records, "stalls": t.stalls, "seconds": t.seconds,
                    "records_per_second": t.records_per_second,
                    "peak_retained": t.peak_retained, "peak_rss_kib": rss_kib,
                })
            );
            Ok(())
        }
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "jitterscope",
                &mut std::io::stdout(),
            );
            Ok(())
        }
    }
}

/// `jitterscope verify`: the table, then exit 1 when the check fails.
fn verify(args: VerifyArgs) -> Result<()> {
    use jitterscope::verify;
    if args.print_perf_events {
        for tp in verify::available_tracepoints().map_err(|e| anyhow::anyhow!(e))? {
            println!("{tp}");
        }
        return Ok(());
    }
    let (Some(run_path), Some(perf_path)) = (&args.run_file, &args.perf_script) else {
        return Err(UsageError("--run and --perf-script are both required".into()).into());
    };
    let run = verify::read_run_file(run_path)?;
    let perf = if perf_path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .context("cannot read perf's events from standard input")?
    } else {
        std::fs::read_to_string(perf_path)
            .with_context(|| format!("cannot read perf's events from {}", perf_path.display()))?
    };
    let tolerances = verify::Tolerances {
        floor_ns: args.floor,
        ..verify::Tolerances::default()
    };
    let c = verify::check(&run, &perf, args.cpu, &tolerances)?;
    if args.all {
        print!("{}", c.to_markdown_all());
    } else {
        print!("{}", c.to_markdown());
    }
    let failures = c.failures();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "the independent check failed on CPU {}: {}",
            c.cpu,
            failures.join("; ")
        ))
    }
}

fn run_workload(args: RunArgs) -> Result<()> {
    let plan = plan::run_plan(&args)?;
    tuning::restore_leftovers();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // Injected noise runs for the whole run, from threads kept off the measured CPUs when
    // the machine has others.
    let noise = (!args.inject.is_empty()).then(|| {
        let topo = Topology::read();
        let mut cpus: Vec<u32> = vec![plan.workload.producer_cpu];
        cpus.extend(&plan.workload.consumer_cpus);
        let mut away = topo.housekeeping(&cpus);
        if away.is_empty() {
            away = vec![plan.workload.producer_cpu];
        }
        jitterscope::workshop::noise::NoiseSet::start(&args.inject, &away)
    });
    let result = session::run(plan, &mut out);
    if let Some(n) = noise {
        for (kind, r) in n.stop() {
            match r {
                Ok(count) => writeln!(out, "injected {kind:?} noise: {count} injections")?,
                Err(e) => writeln!(out, "injected {kind:?} noise: {e}")?,
            }
        }
    }
    let outcome = result.map_err(|e| {
        if e.is::<jitterscope::signals::Interrupted>() {
            e
        } else {
            e.context("the run failed")
        }
    })?;
    let _ = out.flush();
    if outcome.run.run.ended == "cpu_lost" {
        return Err(anyhow::anyhow!(
            "the run ended early: {}; {} holds what was measured until then (marked cpu_lost)",
            outcome.run.run.end_reason,
            outcome.json_path.display()
        ));
    }
    Ok(())
}

fn floor(args: FloorArgs) -> Result<()> {
    let cpus = parse_cpus(&args.cpus, &Topology::read())?;
    if cpus.len() != 2 {
        return Err(UsageError(format!(
            "--cpus {}: floor measures between exactly two CPUs, e.g. --cpus 0,1",
            args.cpus
        ))
        .into());
    }
    let h = jitterscope::workload::pingpong::measure(cpus[0], cpus[1], args.rounds).with_context(
        || {
            format!(
                "cannot run the ping-pong between CPUs {} and {}",
                cpus[0], cpus[1]
            )
        },
    )?;
    let s = jitterscope::report::seed::Summary::of(&h);
    if args.json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        print!(
            "{}",
            jitterscope::report::seed::block(
                &format!(
                    "Cross-core transfer floor CPU {} <-> CPU {}, one way",
                    cpus[0], cpus[1]
                ),
                &s
            )
        );
    }
    Ok(())
}

fn report(run: &RunFile, args: &ReportArgs) -> Result<()> {
    let text = if args.format == "text" && args.output.is_none() {
        jitterscope::report::text::render(run, plan::colour_on_stdout())
    } else {
        let exporter = export::by_name(&args.format)
            .ok_or_else(|| UsageError(format!("--format {}: unknown format", args.format)))?;
        exporter.render(run)
    };
    match &args.output {
        Some(path) => write_file(path, text.as_bytes())?,
        None => print!("{text}"),
    }
    Ok(())
}

fn noise(args: NoiseArgs) -> Result<()> {
    use jitterscope::workshop::noise::{inject, NoiseError};
    let cpu = parse_cpu_list(&args.cpu, &Topology::read(), 1)?;
    if cpu.len() != 1 {
        return Err(UsageError(format!("--cpu {}: give one CPU, e.g. --cpu 1", args.cpu)).into());
    }
    // A journal left by a killed run is undone first, so its old values are not lost.
    tuning::restore_leftovers();
    println!(
        "injecting {:?} noise on CPU {} at {}/s for {} (Ctrl-C ends early)",
        args.kind,
        cpu[0],
        args.rate,
        jitterscope::units::fmt_ns(args.duration)
    );
    let stop = || jitterscope::signals::received().is_some();
    let log = match inject(args.kind, cpu[0], args.rate, args.duration, &stop) {
        Ok(log) => log,
        Err(NoiseError::Unavailable(why)) => {
            println!("skipped: {why}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = &args.log {
        let lines: String = log
            .iter()
            .map(|i| serde_json::to_string(i).unwrap_or_default() + "\n")
            .collect();
        write_file(path, lines.as_bytes())?;
    }
    println!("{} injections", log.len());
    Ok(())
}

fn workshop(args: WorkshopArgs) -> Result<()> {
    use jitterscope::workshop::steps::{run_step, Step};
    let topo = Topology::read();
    let cpus = parse_cpus(&args.cpus, &topo)?;
    if cpus.len() != 2 {
        return Err(UsageError(format!(
            "--cpus {}: the workshop uses one producer and one consumer CPU, e.g. --cpus 1,3",
            args.cpus
        ))
        .into());
    }
    let output = OutputDir::prepare(&args.output).map_err(|e| UsageError(e.to_string()))?;
    let others = topo.housekeeping(&cpus[1..]);
    tuning::restore_leftovers();
    let mut workload = WorkloadConfig::new(cpus[0], vec![cpus[1]]);
    workload.duration_ns = args.duration;
    workload.warmup_ns = 500_000_000;
    workload.stall_threshold_ns = auto_stall_threshold_ns();
    let base = RunPlan {
        workload,
        label: "workshop".into(),
        output,
        stall_threshold_auto: true,
        keep_stalls: 200,
        progress: false,
        tui: false,
        colour: false,
        probes: Some(8 << 20),
    };
    let steps: Vec<Step> = match args.step {
        Some(s) => vec![s],
        None => Step::ALL.to_vec(),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "workshop: producer CPU {}, consumer CPU {}; noise on CPU {}: a competing task, stat_refresh kworkers{}; fixes go to CPU {}",
        cpus[0],
        cpus[1],
        cpus[1],
        if jitterscope::workshop::noise::steerable_irq().is_some() { ", the virtio-rng IRQ" } else { "" },
        jitterscope::system::cpus::format_list(&others)
    )?;
    if topo.online.len() <= 2 {
        writeln!(out, "note: with 2 CPUs the producer shares CPU {} with the rest of the system: shielding, IRQ and workqueue steering clear the consumer's CPU only", cpus[0])?;
    }
    let mut runs = Vec::new();
    let (mut passed, mut total) = (0, 0);
    for step in steps {
        if step == Step::Governor
            && !std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{}/cpufreq", cpus[1]))
                .exists()
        {
            writeln!(out, "\n=== GOVERNOR ===\n  skipped: no cpufreq driver on CPU {} (a VM, or a driver-less machine): the frequency is the host's or firmware's to set", cpus[1])?;
            continue;
        }
        let (run, checks) = run_step(step, &base, &others, &mut out)?;
        let interrupted = run.run.ended != "completed";
        passed += checks.iter().filter(|c| c.passed).count();
        total += checks.len();
        runs.push((step.title().to_string(), run));
        if interrupted {
            writeln!(out, "\nworkshop: stopped after step {} (the run ended early); the steps after it did not run", step.title())?;
            break;
        }
    }
    if runs.len() > 1 {
        writeln!(out, "\n{}", jitterscope::report::compare::render(&runs))?;
    }
    writeln!(out, "\nworkshop: {passed} of {total} checks passed")?;
    if passed < total {
        return Err(anyhow::anyhow!(
            "{} of {total} workshop checks failed (see above)",
            total - passed
        ));
    }
    Ok(())
}
