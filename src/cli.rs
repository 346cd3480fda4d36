//! The command line: clap definitions and the validation of every value, with messages
//! that name the flag, the value and the fix. `plan` turns the flags into the plain values
//! the commands take; `commands` holds the commands that compose at this top layer.

pub mod commands;
pub mod man;
pub mod plan;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::model::{Cpu, Nanos};
use crate::system::cpus::{format_list, Topology};

/// A mistake in how jitterscope was invoked (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// An error and its causes as the one line `main` prints: each cause after a colon, except
/// a cause the line already says (an error whose message includes its source, as
/// `#[error("…: {source}")]` does, would otherwise show that source twice).
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

const EXAMPLES: &str = "\
Examples:
  sudo jitterscope --cpus 1,3                  producer on CPU 1, consumer on CPU 3, 10 s
  sudo jitterscope --cpus 1,3,5 --duration 2m  two consumers (accumulator, journaller)
  sudo jitterscope --cpus 0,1 --no-pin --label baseline
  jitterscope report jitterscope-runs/baseline-20261122T120000Z.json
  jitterscope completions bash > /etc/bash_completion.d/jitterscope";

#[derive(Debug, Parser)]
#[command(
    name = "jitterscope",
    version,
    about = "Runs a pinned busy-spin producer/consumer workload and attributes each latency spike to the kernel activity that caused it",
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the workload and report (the default command)
    #[command(after_help = EXAMPLES)]
    Run(RunArgs),
    /// Render a saved run file again (no root needed)
    Report(ReportArgs),
    /// Compare runs side by side: percentiles with ratios to the first, culprits that came or went
    Compare(CompareArgs),
    /// Explain the stalls of your own threads: every interruption of a running process's
    /// threads (or of a command started here), by culprit (needs root)
    #[command(after_help = WATCH_EXAMPLES)]
    Watch(WatchArgs),
    /// Did the isolation take? Each promise made to the CPUs (no other tasks, no tick, no
    /// device IRQs, no unbound work …) held against what they did while a thread held them;
    /// exit 1 when one was broken (needs root)
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
    /// Trace what interrupts the given CPUs, without the workload (needs root)
    #[command(
        after_help = "Examples:\n  sudo jitterscope probe --cpus 1,3 --duration 10s\n  sudo jitterscope probe --cpus 1 --no-log"
    )]
    Probe(ProbeArgs),
    /// Measure the cross-core transfer floor between two CPUs (cache-line ping-pong)
    Floor(FloorArgs),
    /// Inject known noise on a CPU (kworker, irq, task, timer, freq, writeback), logging each injection
    #[command(
        after_help = "Examples:\n  sudo jitterscope noise --cpu 1 --kind kworker --rate 100 --duration 10s\n  sudo jitterscope noise --cpu 1 --kind irq --rate 200 --log irq.jsonl"
    )]
    Noise(NoiseArgs),
    /// The perf-workshop's tuning steps with injected noise, each measured and graded
    #[command(
        after_help = "Examples:\n  sudo jitterscope workshop --cpus 1,3\n  sudo jitterscope workshop --cpus 0,1 --step pinned --duration 5s\n  sudo jitterscope workshop --cpus 0,1 --step boot --after-reboot jitterscope-runs/workshop-boot-20261127T212000Z.json"
    )]
    Workshop(WorkshopArgs),
    /// Apply tuning steps for the measured CPUs and hold them (restored at the end, on Ctrl-C,
    /// or by `restore` after a kill)
    #[command(
        after_help = "Examples:\n  sudo jitterscope tune --cpus 1,3 --irqs --kworkers --hold 10m\n  sudo jitterscope tune --cpus 3 --shield --stat-interval 10"
    )]
    Tune(TuneArgs),
    /// Put back every system setting a killed jitterscope left changed (from the restore journal)
    Restore,
    /// Check a run's attribution against perf: measured time per cause on a CPU against
    /// perf's net durations over the same window (see scripts/verify.sh); or, with
    /// --wakeups, a watched thread's wake-up delays against perf's
    #[command(after_help = VERIFY_EXAMPLES)]
    Verify(VerifyArgs),
    #[command(name = "__spin", hide = true)]
    Spin {
        #[arg(long)]
        cpu: u32,
        #[arg(long)]
        fifo: bool,
        #[arg(long)]
        cgroup: Option<PathBuf>,
    },
    #[command(name = "__noise-task", hide = true)]
    NoiseTask {
        #[arg(long)]
        cpu: u32,
        #[arg(long)]
        rate: u32,
    },
    #[command(name = "__noise-timer", hide = true)]
    NoiseTimer {
        #[arg(long)]
        cpu: u32,
        #[arg(long)]
        rate: u32,
    },
    /// Measure the attribution engine's throughput on a synthetic stream (for scripts/bench.sh)
    #[command(hide = true)]
    BenchEngine {
        /// Records to feed
        #[arg(long, default_value_t = 5_000_000)]
        records: u64,
    },
    /// Write the man pages into a directory (for scripts/man.sh)
    #[command(hide = true)]
    Man {
        /// Directory to write jitterscope.1 and jitterscope-<command>.1 into
        #[arg(long)]
        out: PathBuf,
    },
    /// Print shell completions
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// CPUs: the producer's first, then one consumer per further CPU (e.g. 1,3 or 1-3)
    #[arg(long, value_name = "P,C[,C…]", allow_hyphen_values = true)]
    pub cpus: Option<String>,

    /// Do not pin the threads (the seed's BASELINE); CPUs then only name the consumers
    #[arg(long)]
    pub no_pin: bool,

    /// Run the consumers SCHED_FIFO at PRIO (1-99; 50 when given alone), the producer
    /// SCHED_OTHER: RT throttling then shows as `throttled`
    #[arg(long, value_name = "PRIO", num_args = 0..=1, default_missing_value = "50", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub fifo: Option<u8>,

    /// Time between two messages, busy-spun by the producer
    #[arg(long, allow_hyphen_values = true, default_value = "10us", value_parser = parse_interval)]
    pub interval: Nanos,

    /// Recorded run time (after warm-up), e.g. 30s, 2m
    #[arg(long, allow_hyphen_values = true, default_value = "10s", value_parser = parse_run_duration)]
    pub duration: Nanos,

    /// Warm-up before recording starts (not recorded)
    #[arg(long, allow_hyphen_values = true, default_value = "1s", value_parser = parse_warmup)]
    pub warmup: Nanos,

    /// Loop gap counted as a stall: `auto` (10× the measured loop period, at least 1µs) or a time
    #[arg(long, allow_hyphen_values = true, default_value = "auto", value_parser = parse_threshold)]
    pub stall_threshold: Threshold,

    /// A message whose transit exceeds this is a spike, explained through both CPUs' stalls
    #[arg(long, default_value = "10us", allow_hyphen_values = true, value_parser = parse_spike_threshold)]
    pub spike_threshold: Nanos,

    /// What every session takes: its name, its files, its display, its rings, its metrics.
    #[command(flatten)]
    pub session: SessionArgs,

    /// Run without kernel probes: measure only, no attribution (no root needed)
    #[arg(long, display_order = SessionArgs::RUN_OWN[0])]
    pub no_probes: bool,

    /// Inject known noise during the run: KIND@CPU:RATE (kworker, irq, task, timer, freq, writeback), repeatable
    #[arg(long, value_name = "KIND@CPU:RATE", value_parser = crate::workshop::noise::parse_spec, display_order = SessionArgs::RUN_OWN[1])]
    pub inject: Vec<(crate::workshop::noise::NoiseKind, Cpu, u32)>,

    /// When culprits are decided: `live`, as the run goes (the live view's culprits); `end`,
    /// after the workload stops — the kernel records wait in the rings meanwhile, so the least
    /// of jitterscope runs beside the workload; `auto`: `end` when every CPU is measured (its
    /// threads must share them), the run is at most a minute long (what the rings hold) and
    /// nothing needs live decisions (--metrics), else `live`
    #[arg(long, value_enum, default_value_t = Attribution::Auto, display_order = SessionArgs::AFTER)]
    pub attribution: Attribution,
}

/// The flags `run` and `watch` share, with the same values and meanings (`watch` names its
/// label's default and what its kept stalls are: see `WatchArgs`).
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// A name for this run (used in file names and reports)
    #[arg(long, default_value = "run", display_order = SessionArgs::ORDER)]
    pub label: String,

    /// Directory for the run file, .hgrm and .hlog files
    #[arg(long, default_value = "jitterscope-runs", display_order = SessionArgs::ORDER + 1)]
    pub output: PathBuf,

    /// Plain text output even on a terminal (always so when stdout is not a terminal)
    #[arg(long, display_order = SessionArgs::ORDER + 2)]
    pub no_tui: bool,

    /// Size of each measured CPU's record ring (power of two, e.g. 8M; other CPUs get a sixteenth); raise it if records are lost [default: 8M for a run, 2M for a watch]
    #[arg(long, allow_hyphen_values = true, value_parser = parse_size, display_order = SessionArgs::ORDER + 4)]
    pub ringbuf_size: Option<u64>,

    /// How many of the worst stalls the run file keeps
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000), display_order = SessionArgs::ORDER + 6)]
    pub keep_stalls: u32,

    /// Write Prometheus metrics to FILE for node_exporter's textfile collector (name it
    /// *.prom, in the collector's directory); rewritten every --metrics-interval and at the end
    #[arg(long, value_name = "FILE", display_order = SessionArgs::ORDER + 7)]
    pub metrics: Option<PathBuf>,

    /// How often the metrics file is rewritten
    #[arg(long, default_value = "10s", requires = "metrics", allow_hyphen_values = true, value_parser = parse_metrics_interval, display_order = SessionArgs::ORDER + 8)]
    pub metrics_interval: Nanos,
}

impl SessionArgs {
    /// Where the shared flags show in `--help`: after each command's own leading flags
    /// (clap numbers flags from 0 in the order they are declared; run has 8, watch 5)...
    const ORDER: usize = 100;
    /// ...with run's --no-probes and --inject in the places left between them...
    const RUN_OWN: [usize; 2] = [Self::ORDER + 3, Self::ORDER + 5];
    /// ...and the flags that follow them after.
    const AFTER: usize = Self::ORDER + 9;
}

/// `--attribution`: when a run decides its culprits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Attribution {
    Auto,
    Live,
    End,
}

const CHECK_EXAMPLES: &str = "\
Examples:
  sudo jitterscope check --cpus 2,3                       a spinner on CPUs 2 and 3 for 10 s, every promise judged
  sudo jitterscope check --cpus 3 --fifo --format json    SCHED_FIFO spinners (RT throttling seen), JSON for scripts
  sudo jitterscope check --cpus 2,3 --pid $(pidof engine) while your own process holds the CPUs
  sudo jitterscope check --cpus 3 -- ./engine --bench     start it, check while it runs
  sudo jitterscope check                                  on a Kubernetes node: every container's exclusive CPUs

Exit status: 0 when every promise held (or could not be told), 1 when one was broken or not
configured while its culprits were seen (or, on a Kubernetes node, something from outside a
pod ran on its exclusive CPU), 2 on usage errors.";

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The CPUs to check (e.g. 2,3 or 2-3); without it, the exclusive CPUs of the kubelet's
    /// CPU manager (--kubelet-state)
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: Option<String>,
    /// How long to look
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub duration: Nanos,
    /// text, json (stable: docs/check.schema.json) or markdown
    #[arg(long, default_value = "text", value_parser = ["text", "json", "markdown"])]
    pub format: String,
    /// Check while this process's threads hold the CPUs (they are left out of what is seen)
    #[arg(long, value_name = "PID", conflicts_with_all = ["fifo", "command"])]
    pub pid: Option<u32>,
    /// Hold the CPUs with SCHED_FIFO spinners (priority 1) instead of SCHED_OTHER ones: RT
    /// throttling can then be seen
    #[arg(long, conflicts_with = "command")]
    pub fifo: bool,
    /// Size of each checked CPU's record ring (power of two, e.g. 4M)
    #[arg(long, default_value = "8M", allow_hyphen_values = true, value_parser = parse_size)]
    pub ringbuf_size: u64,
    /// Also write the JSON form to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The kubelet's CPU manager checkpoint: its containers' exclusive CPUs are checked, and
    /// whatever ran there from outside the pod is named [default: /var/lib/kubelet/cpu_manager_state, where it exists]
    #[arg(long, value_name = "FILE")]
    pub kubelet_state: Option<PathBuf>,
    /// The command to start and check while it runs (after --)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

const WATCH_EXAMPLES: &str = "\
Examples:
  sudo jitterscope watch --pid $(pidof myapp)            every thread of myapp, until Ctrl-C or its exit
  sudo jitterscope watch --tid 4122,4123 --duration 1m  two threads, one minute
  sudo jitterscope watch --comm 'md-*' --cpus 2,3       threads named md-…, interruptions on CPUs 2 and 3
  sudo jitterscope watch -- ./engine --config prod.toml start it, watch it; its exit ends the watch
  sudo jitterscope watch --container engine             a container's threads (podman, docker, crictl)
  sudo jitterscope watch --cgroup /system.slice/md.service  a cgroup's threads, and those that join it";

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("target").args(["pid", "tid", "comm", "cgroup", "container", "command"]).required(true)))]
#[command(mut_arg("label", |a| a
    .default_value("watch")
    .help("A name for this watch (used in file names and reports)")))]
#[command(mut_arg("keep_stalls", |a| a.help("How many of the worst interruptions the run file keeps")))]
pub struct WatchArgs {
    /// Every thread of this process (and the threads it creates while watched)
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// These threads only (ids as `ps -L` shows them)
    #[arg(long, value_name = "TID[,TID…]", value_delimiter = ',')]
    pub tid: Vec<u32>,
    /// Threads whose name is NAME (or starts with it when NAME ends in *)
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
    /// Every thread in this cgroup v2 directory and below (a path as /proc/PID/cgroup shows
    /// it, or under the v2 mount), and the threads created in or moved into it while watched
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,
    /// Every thread of this container (a name, or an id of 12 hex digits or more), found
    /// through podman, docker or crictl, or by its cgroup's name; as --cgroup of its cgroup
    #[arg(long, value_name = "NAME|ID")]
    pub container: Option<String>,
    /// Only interruptions on these CPUs count (default: every online CPU)
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: Option<String>,
    /// How long to watch (default: until Ctrl-C or the target exits)
    #[arg(long, allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub duration: Option<Nanos>,
    /// What every session takes: its name, its files, its display, its rings, its metrics.
    #[command(flatten)]
    pub session: SessionArgs,
    /// The command to start and watch (after --)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// CPUs to watch (e.g. 1,3 or 2-3)
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: String,
    /// How long to watch
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub duration: Nanos,
    /// Size of each measured CPU's record ring (power of two, e.g. 4M; other CPUs get a sixteenth)
    #[arg(long, default_value = "8M", allow_hyphen_values = true, value_parser = parse_size)]
    pub ringbuf_size: u64,
    /// Print only the summary, not every interruption
    #[arg(long)]
    pub no_log: bool,
    /// Print the summary as JSON (counts per class, BPF cost per program, drops)
    #[arg(long)]
    pub json: bool,
    /// Also attach reference programs — to sched_switch and to local_timer_entry, one that
    /// does nothing and one that only reads the clock — and report what a run of each costs:
    /// the floor under every per-event figure on this kernel and machine (they run on every
    /// context switch and timer interrupt of every CPU while the probe lasts). They run after
    /// the probes' own programs
    #[arg(long)]
    pub floor: bool,
    /// As --floor, with the reference programs run before the probes' own: the first clock
    /// read of each timer interrupt, dearer than any later one, is then theirs, and the timer
    /// programs' figures are their own work
    #[arg(long)]
    pub floor_first: bool,
    /// Write Prometheus metrics to FILE for node_exporter's textfile collector (name it
    /// *.prom, in the collector's directory); rewritten every --metrics-interval and at the end
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// How often the metrics file is rewritten
    #[arg(long, default_value = "10s", requires = "metrics", allow_hyphen_values = true, value_parser = parse_metrics_interval)]
    pub metrics_interval: Nanos,
}

#[derive(Debug, Clone, Args)]
pub struct FloorArgs {
    /// Two CPUs: the timing side, then the echo side
    #[arg(long, value_name = "A,B", allow_hyphen_values = true)]
    pub cpus: String,
    /// Round trips to measure
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1_000..=1_000_000_000))]
    pub rounds: u64,
    /// Print the figures as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct WorkshopArgs {
    /// Producer CPU, then the consumer CPU (the noise goes to the consumer's)
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: String,
    /// Run only this step (the fixes of the steps before it are applied too)
    #[arg(long, value_enum)]
    pub step: Option<crate::workshop::steps::Step>,
    /// Recorded time per step
    #[arg(long, default_value = "5s", allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub duration: Nanos,
    /// Directory for the steps' run files
    #[arg(long, default_value = "jitterscope-runs")]
    pub output: PathBuf,
    /// With --step boot: compare the run file the BOOT step saved before a reboot with a run
    /// measured now (or with AFTER.json, without measuring)
    #[arg(long, num_args = 1..=2, value_names = ["BEFORE.json", "AFTER.json"])]
    pub after_reboot: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TuneArgs {
    /// The CPUs to clear (the measured ones)
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: String,
    /// Move every IRQ that allows it to the other CPUs
    #[arg(long)]
    pub irqs: bool,
    /// Keep unbound workqueue work off these CPUs (the workqueue cpumask)
    #[arg(long)]
    pub kworkers: bool,
    /// Set vm.stat_interval (seconds between vmstat_update runs)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub stat_interval: Option<u32>,
    /// Move every movable task into a cpuset of the other CPUs (cset shield)
    #[arg(long)]
    pub shield: bool,
    /// Set this cpufreq governor on these CPUs (e.g. performance)
    #[arg(long)]
    pub governor: Option<String>,
    /// How long to hold the settings before restoring them
    #[arg(long, default_value = "10m", allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub hold: Nanos,
}

#[derive(Debug, Clone, Args)]
pub struct NoiseArgs {
    /// The CPU to disturb
    #[arg(long, allow_hyphen_values = true)]
    pub cpu: String,
    /// What to inject
    #[arg(long, value_enum)]
    pub kind: crate::workshop::noise::NoiseKind,
    /// Injections per second (`100` or `100/s`)
    #[arg(long, default_value = "100", value_parser = parse_rate)]
    pub rate: u32,
    /// How long
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = parse_run_duration)]
    pub duration: Nanos,
    /// Write every injection (kind, cpu, start_ns, end_ns) as JSON lines to this file
    #[arg(long)]
    pub log: Option<PathBuf>,
}

/// `100` or `100/s`: 1 to 10000 per second.
pub fn parse_rate(text: &str) -> Result<u32, String> {
    let t = text.trim().trim_end_matches("/s");
    let n: u32 = t.parse().map_err(|_| {
        format!("'{text}' is not a rate; give injections per second, e.g. 100 or 100/s")
    })?;
    if !(1..=10_000).contains(&n) {
        return Err(format!("{n} per second is outside 1 to 10000"));
    }
    Ok(n)
}

const VERIFY_EXAMPLES: &str = "\
Examples:
  sudo scripts/verify.sh --cpus 0,1            record, inject known noise, compare, grade
  sudo scripts/verify.sh --order both          each scenario in both attach orders
  jitterscope verify --run RUN.json --perf-script perf.txt --cpu 1
  jitterscope verify --run A.json --perf-script A.txt --swapped-run B.json --swapped-perf-script B.txt
  jitterscope verify --run WATCH.json --perf-script perf.txt --wakeups 4121

perf's side, started before the run and stopped (SIGINT) after it:
  perf record -k mono -C 0,1 $(jitterscope verify --print-perf-events | sed 's/^/-e /') -o perf.data
  perf script --ns -F cpu,time,event,trace -i perf.data > perf.txt
For --wakeups, record every CPU (-a instead of -C): a wake-up is traced on the waker's CPU.

Exit code 1 when a graded cause is out of tolerance or the overall agreement is too low
(--wakeups: when the total wake-up delay is out of tolerance or the thread is not in the run).";

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The run file of the run perf recorded
    #[arg(
        long = "run",
        value_name = "RUN.json",
        required_unless_present = "print_perf_events"
    )]
    pub run_file: Option<PathBuf>,
    /// `perf script --ns` output of `perf record -k mono` over the run (`-`: standard input)
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "print_perf_events"
    )]
    pub perf_script: Option<PathBuf>,
    /// The CPU to compare (default: the run's first consumer CPU)
    #[arg(long)]
    pub cpu: Option<Cpu>,
    /// Compare the wake-up delays of this thread of a `jitterscope watch` run file (its id
    /// as you see it) instead of time per cause
    #[arg(long, value_name = "TID", conflicts_with_all = ["cpu", "all"])]
    pub wakeups: Option<u32>,
    /// How far jitterscope's total wake-up delay may lie from perf's (--wakeups)
    #[arg(long, value_name = "PCT", default_value = "5%", value_parser = parse_percent)]
    pub wakeup_tolerance: f64,
    /// Causes under this in both recorders are listed, not graded
    #[arg(long, default_value = "1ms", allow_hyphen_values = true, value_parser = parse_floor)]
    pub floor: Nanos,
    /// List every cause under the floor (by default the largest few, the rest summed up)
    #[arg(long)]
    pub all: bool,
    /// The same scenario recorded again with the other tracer attached first at each
    /// tracepoint: its run file. A cause outside its tolerance in one order then passes when
    /// the two orders put it on either side of perf's and reach the tolerance between them
    /// (the tracer attached second sees short episodes shorter)
    #[arg(
        long,
        value_name = "RUN.json",
        requires = "swapped_perf_script",
        conflicts_with = "wakeups"
    )]
    pub swapped_run: Option<PathBuf>,
    /// perf's events of the --swapped-run recording
    #[arg(long, value_name = "FILE", requires = "swapped_run")]
    pub swapped_perf_script: Option<PathBuf>,
    /// Which tracer was attached first at each tracepoint in the --run recording (the
    /// --swapped-run one had the other first). The tracer attached second sees each episode
    /// shorter by the first one's handler: each cause may lie that much further on the
    /// order's side (1.2 µs per piece of perf's). perf-first is the recording shown below
    #[arg(
        long,
        value_enum,
        default_value = "perf-first",
        conflicts_with = "wakeups"
    )]
    pub order: AttachOrder,
    /// Print the tracepoints perf must record (those this kernel has), one a line, and exit
    #[arg(long)]
    pub print_perf_events: bool,
}

/// Which tracer was attached first at each tracepoint of a `verify` recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachOrder {
    PerfFirst,
    JitterscopeFirst,
}

fn parse_floor(text: &str) -> Result<Nanos, String> {
    parse_duration(text)
}

/// `5%` → 0.05; 0 % to 100 %.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let Some(num) = text.trim().strip_suffix('%') else {
        return Err(format!("'{text}' is not a percentage; give e.g. 5%"));
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{num}' is not a number; give e.g. 5%"))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(format!("{value}% is outside 0% to 100%"));
    }
    Ok(value / 100.0)
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Run files, the reference first
    #[arg(required = true, num_args = 2..)]
    pub run_files: Vec<PathBuf>,
    /// Also write a chart overlaying the runs' percentile curves (SVG)
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A run file written by `jitterscope run`
    pub run_file: PathBuf,
    /// text, markdown, json, svg (percentile chart) or perfetto (trace of the worst stalls)
    #[arg(long, default_value = "text", value_parser = ["text", "markdown", "json", "svg", "perfetto"])]
    pub format: String,
    /// Write to this file instead of standard output
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// The stall threshold as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    Auto,
    Fixed(Nanos),
}

const UNITS: &str = "ns, us (or µs), ms, s, m, h";

/// Parses `10us`, `1.5ms`, `30s`, `2m`, `1h` into nanoseconds.
pub fn parse_duration(text: &str) -> Result<Nanos, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!(
            "empty; give a number with a unit ({UNITS}), e.g. 30s"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if t.starts_with('-') {
        return Err("negative; give a positive time, e.g. 30s".into());
    }
    if num.is_empty() {
        return Err(format!("no number; give e.g. 30s (units: {UNITS})"));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{num}' is not a number; give e.g. 30s"))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(format!(
                "missing unit; write e.g. {num}s or {num}us (units: {UNITS})"
            ))
        }
        other => return Err(format!("unknown unit '{other}' (units: {UNITS})")),
    };
    let ns = value * scale;
    if !ns.is_finite() || ns > 1e18 {
        return Err("too large (over 10^18 ns, about 31 years); give e.g. 30s".into());
    }
    Ok(ns.round() as Nanos)
}

fn parse_bounded(text: &str, min: Nanos, max: Nanos, what: &str) -> Result<Nanos, String> {
    let ns = parse_duration(text)?;
    if ns == 0 {
        return Err(format!(
            "zero is not a usable {what}; give e.g. {}",
            crate::units::fmt_ns(min.max(1) * 10)
        ));
    }
    if ns < min {
        return Err(format!(
            "below the smallest {what} ({})",
            crate::units::fmt_ns(min)
        ));
    }
    if ns > max {
        return Err(format!(
            "above the largest {what} ({})",
            crate::units::fmt_ns(max)
        ));
    }
    Ok(ns)
}

fn parse_interval(text: &str) -> Result<Nanos, String> {
    parse_bounded(text, 100, 1_000_000_000, "message interval")
}

fn parse_run_duration(text: &str) -> Result<Nanos, String> {
    parse_bounded(
        text,
        1_000_000,
        7 * 24 * 3600 * 1_000_000_000,
        "run duration",
    )
}

fn parse_metrics_interval(text: &str) -> Result<Nanos, String> {
    parse_bounded(
        text,
        1_000_000_000,
        24 * 3600 * 1_000_000_000,
        "metrics interval",
    )
}

fn parse_warmup(text: &str) -> Result<Nanos, String> {
    if parse_duration(text)? == 0 {
        return Ok(0);
    }
    parse_bounded(text, 1, 3600 * 1_000_000_000, "warm-up")
}

fn parse_spike_threshold(text: &str) -> Result<Nanos, String> {
    parse_bounded(text, 100, 10_000_000_000, "spike threshold")
}

fn parse_threshold(text: &str) -> Result<Threshold, String> {
    if text.trim() == "auto" {
        return Ok(Threshold::Auto);
    }
    parse_bounded(text, 100, 1_000_000_000, "stall threshold").map(Threshold::Fixed)
}

/// Parses a byte size: `65536`, `64K`, `8M`, `1G` (binary units).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err("negative; give a positive size, e.g. 8M".into());
    }
    let (num, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let m = match t[i..]
                .to_ascii_uppercase()
                .trim_end_matches("IB")
                .trim_end_matches('B')
            {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                other => {
                    return Err(format!(
                        "unknown unit '{other}'; give e.g. 4M (units K, M, G)"
                    ))
                }
            };
            (&t[..i], m)
        }
    };
    let n: u64 = match num.parse() {
        Ok(n) => n,
        // All digits but past u64: refused below as above the limit, like an overflowing product.
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => u64::MAX,
        Err(_) => return Err(format!("'{t}' is not a size; give e.g. 4M")),
    };
    let bytes = n.saturating_mul(mult);
    if bytes < 4096 {
        return Err("below one page (4K)".into());
    }
    if bytes > 1 << 30 {
        return Err("above 1G, the largest ring buffer jitterscope uses".into());
    }
    Ok(bytes)
}

/// Validates `--cpus` against the machine: at least two CPUs, no duplicates, each present,
/// online and allowed for this process. Returns them in the given order (producer first).
pub fn parse_cpus(text: &str, topo: &Topology) -> Result<Vec<Cpu>, UsageError> {
    parse_cpu_list(text, topo, 2)
}

/// As `parse_cpus`, with at least `min` CPUs (1 for `probe`).
pub fn parse_cpu_list(text: &str, topo: &Topology, min: usize) -> Result<Vec<Cpu>, UsageError> {
    let err = |why: String| UsageError(format!("--cpus {text}: {why}"));
    let example = "e.g. --cpus 1,3 (producer on CPU 1, consumer on CPU 3)";
    let absent = |c: Cpu| {
        format!(
            "CPU {c} does not exist; this machine has CPUs {}",
            format_list(&topo.present)
        )
    };
    if text.trim().is_empty() {
        return Err(UsageError(format!(
            "--cpus '': no CPUs given; give the producer's CPU then one or more consumer CPUs, {example}"
        )));
    }
    let mut cpus: Vec<Cpu> = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(err(format!(
                "an empty entry; separate CPU numbers with single commas, {example}"
            )));
        }
        let number = |s: &str| -> Result<Cpu, UsageError> {
            s.parse::<Cpu>().map_err(|_| {
                err(format!(
                    "'{s}' is not a CPU number; CPUs are numbered from 0, {example}"
                ))
            })
        };
        match part.split_once('-') {
            Some(("", _)) => {
                return Err(err(format!(
                    "'{part}' is not a CPU number; CPUs are numbered from 0, {example}"
                )))
            }
            Some((a, b)) => {
                if b.is_empty() {
                    return Err(err(format!(
                        "'{part}' is not a complete range; write e.g. 1-3"
                    )));
                }
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(err(format!("range '{part}' runs backwards; write {b}-{a}")));
                }
                // Checked before expanding: `0-4294967295` would otherwise build a list of
                // four billion CPUs before any check ran.
                if !topo.present.contains(&b) {
                    return Err(err(absent(b)));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    for (i, c) in cpus.iter().enumerate() {
        if cpus[..i].contains(c) {
            return Err(err(format!(
                "CPU {c} is given twice; the producer and each consumer need a CPU of their own"
            )));
        }
    }
    if cpus.len() < min {
        return Err(err(format!(
            "one CPU is not enough; give the producer's CPU then at least one consumer CPU, {example}"
        )));
    }
    for &c in &cpus {
        if !topo.present.contains(&c) {
            return Err(err(absent(c)));
        }
        if !topo.online.contains(&c) {
            return Err(err(format!(
                "CPU {c} is offline (online: {}); bring it up with: echo 1 > /sys/devices/system/cpu/cpu{c}/online",
                format_list(&topo.online)
            )));
        }
        if !topo.allowed.contains(&c) {
            return Err(err(format!(
                "CPU {c} is not in this process's allowed CPUs ({}); run jitterscope outside the cpuset that excludes it, or choose from those",
                format_list(&topo.allowed)
            )));
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_line_says_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read run file -: {source}")]
        struct Read {
            source: std::io::Error,
        }
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let cause = io.to_string();
        let e = anyhow::Error::new(Read { source: io }).context("the report failed");
        assert_eq!(
            super::error_line(&e),
            format!("the report failed: cannot read run file -: {cause}")
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::error_line(&e), "outer: inner");
    }

    use super::*;

    fn topo() -> Topology {
        Topology {
            present: (0..8).collect(),
            online: vec![0, 1, 2, 3, 5, 6, 7],
            allowed: vec![0, 1, 2, 3, 5, 6],
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10us"), Ok(10_000));
        assert_eq!(parse_duration("10µs"), Ok(10_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("2m"), Ok(120_000_000_000));
        assert!(parse_duration("10").unwrap_err().contains("missing unit"));
        assert!(parse_duration("10sec")
            .unwrap_err()
            .contains("unknown unit 'sec'"));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_run_duration("0s").unwrap_err().contains("zero"));
        assert!(parse_interval("1h")
            .unwrap_err()
            .contains("above the largest"));
        assert_eq!(parse_threshold("auto"), Ok(Threshold::Auto));
        assert_eq!(parse_threshold("5us"), Ok(Threshold::Fixed(5_000)));
        assert_eq!(parse_size("8M"), Ok(8 << 20));
        assert_eq!(parse_rate("100/s"), Ok(100));
        assert!(parse_rate("0").unwrap_err().contains("outside"));
        assert!(parse_rate("fast").unwrap_err().contains("not a rate"));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert!(parse_size("1").unwrap_err().contains("below one page"));
        assert!(parse_size("3X").unwrap_err().contains("unknown unit"));
        assert!(parse_size("17179869184G").unwrap_err().contains("above 1G"));
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .contains("above 1G"));
        assert!(parse_duration("1e400s")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_duration("999999999999h")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_duration("999999999999h")
            .unwrap_err()
            .contains("e.g."));
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("12.5 %"), Ok(0.125));
        assert!(parse_percent("0.05")
            .unwrap_err()
            .contains("not a percentage; give e.g. 5%"));
        assert!(parse_percent("x%")
            .unwrap_err()
            .contains("'x' is not a number"));
        assert!(parse_percent("150%")
            .unwrap_err()
            .contains("outside 0% to 100%"));
        assert!(parse_percent("NaN%").is_err());
    }

    #[test]
    fn cpu_lists() {
        let t = topo();
        assert_eq!(parse_cpus("1,3", &t).unwrap(), [1, 3]);
        assert_eq!(parse_cpus("1-3", &t).unwrap(), [1, 2, 3]);
        assert_eq!(parse_cpus("6,0-1", &t).unwrap(), [6, 0, 1]);
        let e = |s: &str| parse_cpus(s, &t).unwrap_err().0;
        assert!(e("").contains("no CPUs given"));
        assert!(e("1").contains("one CPU is not enough"));
        assert!(e("1,1").contains("CPU 1 is given twice"));
        assert!(e("0-4294967295").contains("CPU 4294967295 does not exist"));
        assert!(e("a,b").contains("'a' is not a CPU number"));
        assert!(e("1,99").contains("CPU 99 does not exist; this machine has CPUs 0-7"));
        assert!(e("1,4").contains("CPU 4 is offline (online: 0-3,5-7)"));
        assert!(e("1,7").contains("CPU 7 is not in this process's allowed CPUs (0-3,5-6)"));
        assert!(e("-1").contains("'-1' is not a CPU number"));
        assert!(e("1-").contains("'1-' is not a complete range"));
        assert!(e("3-1").contains("runs backwards"));
        assert!(e("1,,3").contains("empty entry"));
    }
}
