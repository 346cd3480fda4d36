//! `jitterscope`: parse, run, print `Error: …` with the whole cause chain. Exit codes:
//! 0 success, 1 runtime failure (also a run whose CPU was taken away or whose files could
//! not be written), 2 usage error (also clap's own), 128+N when signal N (SIGHUP 1, SIGINT 2,
//! SIGTERM 15) ended a run or workshop early — its files are written and marked
//! `interrupted`. For `tune --hold`, `probe` and `noise` a signal is the ordinary way to end
//! early: they exit 0.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use jitterscope::cli::{commands, plan, Cli, Command, UsageError};
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
            Some(Command::Probe(_))
                | Some(Command::Check(_))
                | Some(Command::Noise(_))
                | Some(Command::Tune(_))
                | Some(Command::Watch(_))
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
            } else if broken_pipe(&e) {
                // The reader went (`report run.json | head`): nothing to say, and nowhere
                // to say it; the status a shell gives a tool that SIGPIPE ended.
                ExitCode::from(128 + libc::SIGPIPE as u8)
            } else if let Some(i) = e.downcast_ref::<jitterscope::signals::Interrupted>() {
                eprintln!("{i}");
                ExitCode::from(jitterscope::signals::exit_code(i.0))
            } else {
                eprintln!("Error: {}", jitterscope::cli::error_line(&e));
                ExitCode::from(1)
            }
        }
    }
}

/// Whether standard output's reader went away (EPIPE, which Rust gets instead of SIGPIPE).
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Each command with the plain values its flags stand for, writing to standard output.
fn run(cli: Cli) -> Result<()> {
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let out: &mut dyn Write = &mut lock;
    match cli.command {
        None => commands::run(&cli.run, out),
        Some(Command::Run(args)) => commands::run(&args, out),
        Some(Command::Watch(args)) => commands::watch(&args, out),
        Some(Command::Report(args)) => commands::report(&args, out),
        Some(Command::Floor(args)) => commands::floor(&args, out),
        Some(Command::Compare(args)) => commands::compare(&args, out),
        Some(Command::Probe(args)) => commands::probe(&args, out),
        Some(Command::Check(args)) => commands::check(&args, out),
        Some(Command::Spin { cpu, fifo, cgroup }) => jitterscope::check::spin(cpu, fifo, cgroup),
        Some(Command::Noise(args)) => noise::run_injection(&plan::injection_config(&args)?, out),
        Some(Command::Tune(args)) => hold::apply_and_hold(&plan::tune_request(&args)?, out),
        Some(Command::Workshop(args)) => workshop::run(&plan::workshop_config(&args)?, out),
        Some(Command::Restore) => tuning::restore_command(out),
        Some(Command::Verify(args)) => verify::run(&plan::verify_request(&args)?, out),
        Some(Command::NoiseTask { cpu, rate }) => noise::run_task(cpu, rate),
        Some(Command::NoiseTimer { cpu, rate }) => noise::run_timer(cpu, rate),
        Some(Command::BenchEngine { records }) => commands::bench_engine(records, out),
        Some(Command::Completions { shell }) => commands::completions(shell, out),
        Some(Command::Man { out: dir }) => jitterscope::cli::man::write_pages(&dir),
    }
}
