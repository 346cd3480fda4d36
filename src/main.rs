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
    parse_cpus, plan, Cli, Command, FloorArgs, ReportArgs, RunArgs, UsageError,
};
use jitterscope::probe::census;
use jitterscope::report::export;
use jitterscope::report::files::write_file;
use jitterscope::report::runfile::RunFile;
use jitterscope::session;
use jitterscope::system::cpus::Topology;
use jitterscope::system::{hold, tuning};
use jitterscope::verify;
use jitterscope::workshop::{self, noise};

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
        Some(Command::Noise(args)) => noise::run_injection(
            &plan::injection_config(&args)?,
            &mut std::io::stdout().lock(),
        ),
        Some(Command::Tune(args)) => {
            hold::apply_and_hold(&plan::tune_request(&args)?, &mut std::io::stdout().lock())
        }
        Some(Command::Workshop(args)) => workshop::run(
            &plan::workshop_config(&args)?,
            &mut std::io::stdout().lock(),
        ),
        Some(Command::Restore) => tuning::restore_command(&mut std::io::stdout().lock()),
        Some(Command::Verify(args)) => {
            verify::run(&plan::verify_request(&args)?, &mut std::io::stdout().lock())
        }
        Some(Command::NoiseTask { cpu, rate }) => noise::run_task(cpu, rate),
        Some(Command::NoiseTimer { cpu, rate }) => noise::run_timer(cpu, rate),
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
        noise::NoiseSet::start(&args.inject, &away)
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
