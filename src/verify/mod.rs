//! The independent check of attribution (DESIGN.md "Attribution"): jitterscope's measured
//! stolen time per cause on a CPU against an independent recorder, `perf record -k mono` of
//! the same CPUs, folded into net durations per cause over the run's recorded window.
//! `perf` reads perf's events, `measured` the run file, `compare` joins and grades them.
//! Pure apart from reading the two files: text in, a graded table out (`scripts/verify.sh`
//! and `tests/verify_bpf.rs` do the recording); `run` is the command that prints it.

pub mod compare;
pub mod measured;
pub mod perf;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::model::Cpu;
use crate::report::runfile::MAX_RUN_FILE_BYTES;

pub use compare::{compare, Comparison, Grade, Tolerances};

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    RunFile(#[from] measured::MeasuredError),
    #[error("cannot read perf's events: {0}")]
    Perf(#[from] perf::ParseError),
    #[error("the run file names no consumer CPU; give one with --cpu")]
    NoCpu,
    #[error("cannot read run file {path}: {cause}")]
    Io { path: String, cause: String },
    #[error("tracefs is not mounted (no {0}/events): perf's tracepoints need it — mount -t tracefs nodev /sys/kernel/tracing")]
    NoTracefs(String),
    #[error("perf's output holds no event of CPU {0}: was it recorded with -C including that CPU and the tracepoints `jitterscope verify --print-perf-events` lists?")]
    NoEvents(Cpu),
}

/// What `jitterscope verify` was asked to do.
#[derive(Debug, Clone)]
pub enum VerifyRequest {
    /// List the tracepoints perf must record, those this kernel has.
    PrintPerfEvents,
    Check(CheckRequest),
}

/// One check: a run file against perf's events of the same run.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub run_file: PathBuf,
    pub perf_script: PerfSource,
    /// The CPU to compare; None: the run's first consumer CPU.
    pub cpu: Option<Cpu>,
    pub tolerances: Tolerances,
    /// List every cause under the floor, not only the largest few.
    pub all: bool,
}

/// Where `perf script` output is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfSource {
    Stdin,
    File(PathBuf),
}

/// `jitterscope verify`: the tracepoint list, or the check's table and then an error (exit
/// 1) when the check fails.
pub fn run(req: &VerifyRequest, out: &mut dyn Write) -> anyhow::Result<()> {
    match req {
        VerifyRequest::PrintPerfEvents => {
            for tp in available_tracepoints().map_err(|e| anyhow::anyhow!(e))? {
                writeln!(out, "{tp}")?;
            }
            Ok(())
        }
        VerifyRequest::Check(c) => run_check(c, out),
    }
}

fn run_check(req: &CheckRequest, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = read_run_file(&req.run_file)?;
    let perf = match &req.perf_script {
        PerfSource::Stdin => std::io::read_to_string(std::io::stdin())
            .context("cannot read perf's events from standard input")?,
        PerfSource::File(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read perf's events from {}", path.display()))?,
    };
    let c = check(&run, &perf, req.cpu, &req.tolerances)?;
    if req.all {
        write!(out, "{}", c.to_markdown_all())?;
    } else {
        write!(out, "{}", c.to_markdown())?;
    }
    let failures = c.failures();
    if !failures.is_empty() {
        anyhow::bail!(
            "the independent check failed on CPU {}: {}",
            c.cpu,
            failures.join("; ")
        );
    }
    Ok(())
}

/// The check on `cpu` (default: the run's first consumer CPU) from a run file's text and
/// `perf script --ns` text.
pub fn check(
    run_file: &str,
    perf_script: &str,
    cpu: Option<Cpu>,
    tolerances: &Tolerances,
) -> Result<Comparison, VerifyError> {
    let cpu = match cpu {
        Some(c) => c,
        None => {
            let any = measured::read_measured(run_file, 0)?;
            *any.consumer_cpus.first().ok_or(VerifyError::NoCpu)?
        }
    };
    let js = measured::read_measured(run_file, cpu)?;
    let events = perf::parse(perf_script)?;
    if !events.iter().any(|e| e.cpu == cpu) {
        return Err(VerifyError::NoEvents(cpu));
    }
    let to_ns = js.record_from_ns.saturating_add(js.duration_ns);
    // A threshold of 0 (an old run file) still keeps the kernel's entry and exit paths
    // inside their stall.
    let gap = if js.stall_threshold_ns > 0 {
        js.stall_threshold_ns
    } else {
        1_000
    };
    let net = perf::net_durations(&events, cpu, js.record_from_ns, to_ns, gap);
    Ok(compare(&js, &net, tolerances))
}

/// A run file's text (size checked first, like `report`'s reader).
pub fn read_run_file(path: &Path) -> Result<String, VerifyError> {
    let io = |cause: String| VerifyError::Io {
        path: path.display().to_string(),
        cause,
    };
    let size = std::fs::metadata(path)
        .map_err(|e| io(e.to_string()))?
        .len();
    if size > MAX_RUN_FILE_BYTES {
        return Err(io(format!(
            "{size} bytes is over the {MAX_RUN_FILE_BYTES} byte limit for a run file"
        )));
    }
    std::fs::read_to_string(path).map_err(|e| io(e.to_string()))
}

/// The tracepoints of `perf::perf_tracepoints()` this kernel has (from tracefs).
pub fn available_tracepoints() -> Result<Vec<String>, VerifyError> {
    let root = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|r| Path::new(r).join("events").is_dir())
        .ok_or_else(|| VerifyError::NoTracefs("/sys/kernel/tracing".into()))?;
    Ok(perf::perf_tracepoints()
        .into_iter()
        .filter(|tp| {
            let (system, event) = tp.split_once(':').unwrap_or((tp, ""));
            Path::new(root)
                .join("events")
                .join(system)
                .join(event)
                .is_dir()
        })
        .collect())
}
