//! The kernel half's user-space side, its public face: what a probe session is asked for
//! (`ProbeConfig`), what it reports (attach states, `ProbeSummary`, `ProbeError`) and the
//! `ProbeSession` that starts the drain thread and talks to it through channels.
//!
//! Behind it: `load` (open, set up, load and attach; errors told apart), `drain` (the thread
//! that owns the skeleton and drains the record rings), `threads` (kernel thread ids and the
//! workload tid table), `stats` (the programs' run-time costs), `abi` (the ABI header's
//! constants) and `decode` (records to the shared vocabulary).

pub mod abi;
pub mod census;
pub mod decode;
mod drain;
pub mod glance;
pub mod kallsyms;
mod load;
pub mod rings;
mod stats;
pub mod steal;
mod threads;
pub mod tick;
pub mod watch;

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    unused_imports,
    non_camel_case_types
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/jitterscope.skel.rs"));
}
pub use skel::*;

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::model::Cpu;
use decode::Record;
use drain::Command;
use load::Loaded;
use threads::Identity;

pub use drain::Gate;
pub use glance::Glance;
pub use load::{bpf_lockdown, check_kernel, permission_error};
pub use stats::{LiveCost, ProgramCost};
pub use threads::{register_tids, ThreadRegistrar};

/// Programs without which jitterscope cannot attribute anything.
pub const MANDATORY: [&str; 7] = [
    "sched_switch",
    "irq_handler_entry",
    "irq_handler_exit",
    "softirq_entry",
    "softirq_exit",
    "workqueue_execute_start",
    "workqueue_execute_end",
];

/// How often the drain thread empties the record rings by default (a run sets its own: see
/// `session::run::turn`).
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub cpus: Vec<Cpu>,
    /// The size of each measured CPU's record ring in bytes (`rings::RingLayout`; the other
    /// CPUs' are a sixteenth): a power-of-two number of pages (`ringbuf_size` rounds).
    pub ringbuf_bytes: u32,
    pub drain_interval: Duration,
    /// While the rings stay empty, the drain waits twice as long each time, up to this; the
    /// first record found brings it back to `drain_interval`. None: always `drain_interval`.
    pub drain_idle: Option<Duration>,
    /// Where the drain thread runs (a housekeeping CPU), None to leave it unpinned.
    pub drain_cpus: Vec<Cpu>,
    /// Also load the raw_tp test seams (tests only).
    pub test_seams: bool,
    /// Watch mode: interruptions of the threads given to `watch_threads` (and, on the CPUs
    /// in `cpus`, only what can matter to them), not of a workload.
    pub watch: bool,
    /// Watch mode: time the watched threads' page faults (fentry/fexit; left out, and said,
    /// where the kernel refuses them).
    pub faults: bool,
    /// Watch mode: how many threads the `watched` map holds (`watch::capacity_for` sizes it
    /// from the target's thread count at the start).
    pub watch_capacity: u32,
    /// What the drain thread may spend of a CPU (shared with the collector), and when its
    /// records are wanted; None: no limit, drained at every turn.
    pub gate: Option<std::sync::Arc<dyn Gate>>,
    /// Whether to load the reference programs too (`js_floor_*`: an empty program and a clock
    /// read on sched_switch, an empty program and a clock read on local_timer_entry), and
    /// where they run; reported apart from the probes' costs (`ProbeSummary::floor`).
    pub floor: Reference,
    /// Deciding at the end: the live preview the drain thread gives the records it glances
    /// at (`glance`); None: none is kept.
    pub glance: Option<Arc<std::sync::Mutex<dyn Glance>>>,
    /// Asked at each peek into a wait longer than `drain_interval`: whether the collector
    /// must wake now (`ProbeSession::wait_drained` returns), without a drain.
    pub attention: Option<fn() -> bool>,
}

/// The reference programs (`probe --floor`): not loaded, or attached after the probes' own
/// programs or before them. Programs on one tracepoint run in the order they were attached,
/// and on the timer interrupt the first clock read of each tick costs far more than a later
/// one: run first, the reference programs take that price and show the probes' own work apart
/// from it; run after, the probes' figures are what a run pays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reference {
    #[default]
    Off,
    AfterProbes,
    BeforeProbes,
}

impl ProbeConfig {
    pub fn new(cpus: Vec<Cpu>) -> Self {
        ProbeConfig {
            cpus,
            ringbuf_bytes: 8 << 20,
            drain_interval: DRAIN_INTERVAL,
            drain_idle: None,
            drain_cpus: Vec::new(),
            test_seams: false,
            watch: false,
            faults: true,
            watch_capacity: abi::WATCH_MAX,
            gate: None,
            floor: Reference::Off,
            glance: None,
            attention: None,
        }
    }
}

/// Rounds a requested size of the record rings to a power of two, at least one page. Returns the size and whether it was changed.
pub fn ringbuf_size(requested: u64) -> (u32, bool) {
    let page = 4096u64;
    let size = requested.clamp(page, 1 << 30).next_power_of_two();
    (size as u32, size != requested)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachState {
    Attached,
    /// Not on this kernel (no such tracepoint) or refused; the reason.
    Unavailable(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachStatus {
    /// The tracepoint, e.g. `sched_switch`, `local_timer_entry`.
    pub tracepoint: String,
    pub state: AttachState,
}

/// What a session leaves behind when stopped.
#[derive(Debug, Clone, Default)]
pub struct ProbeSummary {
    /// Records dropped because a ring was full, per CPU (only CPUs with drops).
    pub drops: Vec<(Cpu, u64)>,
    /// Records submitted per measured CPU.
    pub events: Vec<(Cpu, u64)>,
    pub costs: Vec<ProgramCost>,
    /// The reference programs' costs, when loaded (`ProbeConfig::floor`): `empty` and
    /// `clock` on sched_switch, `timer_empty` and `timer_clock` on local_timer_entry.
    pub floor: Vec<ProgramCost>,
    /// Where the reference programs ran (`ProbeConfig::floor`).
    pub floor_place: Reference,
    /// False when the kernel refused run-time statistics (they need CAP_SYS_ADMIN).
    pub stats_enabled: bool,
    /// False when /proc/kallsyms hid its addresses (no CAP_SYSLOG): work functions and
    /// IPI callbacks are then shown as addresses.
    pub symbols: bool,
    /// True when the probes read the CPUs' KVM steal clock (`Record::Steal`): uncovered time
    /// without steal growth is then not host preemption.
    pub steal_clock: bool,
    /// Why there is no steal clock, one line (`no KVM steal clock (…)`); None when there is.
    pub steal_clock_note: Option<String>,
    /// The steal clock's last value read on each measured CPU (ns the host has kept it off
    /// its physical CPU since boot; `steal` in /proc/stat), for CPUs where it was read.
    pub steal_clock_ns: Vec<(Cpu, u64)>,
    /// The scheduler tick's stops and kept ticks on each measured CPU (`timer:tick_stop`);
    /// empty when that tracepoint could not be attached.
    pub tick_stops: Vec<crate::model::TickStops>,
    /// Watch mode: threads the programs would have watched from their creation (or their
    /// move into the watched cgroup) but left out because the thread map was full.
    pub watch_map_full: u64,
}

impl ProbeSummary {
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(|d| d.1).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot load BPF programs: permission denied ({errno}); jitterscope needs root or CAP_BPF+CAP_PERFMON — run it with sudo")]
    Permission { errno: String },
    #[error("cannot load BPF programs: this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); jitterscope needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (5.8 or newer)")]
    NoBtf,
    #[error("cannot load BPF programs: the kernel is locked down ({mode}), which forbids BPF programs that read kernel memory; boot with lockdown=integrity or lockdown=none (Secure Boot may set it), or measure without attribution: --no-probes")]
    Lockdown { mode: String },
    #[error("the kernel's verifier rejected a BPF program: {cause}\n{log}")]
    Verifier { cause: String, log: String },
    #[error("cannot attach tp_btf/{tracepoint}: {cause}; this tracepoint is required")]
    Attach { tracepoint: String, cause: String },
    #[error("cannot {action}: {cause}")]
    Other { action: String, cause: String },
    #[error("cannot learn {what} in the kernel's numbering through BPF_PROG_TEST_RUN: {cause}; jitterscope needs Linux 5.10 or newer (test runs of raw_tp programs)")]
    Identity { what: &'static str, cause: String },
    #[error("the BPF drain thread ended unexpectedly")]
    ThreadGone,
}

/// Decoded records of one drain.
pub type ProbeBatch = Vec<Record>;

pub struct ProbeSession {
    commands: Sender<Command>,
    thread: Option<JoinHandle<Result<ProbeSummary, ProbeError>>>,
    attach: Vec<AttachStatus>,
    /// Ok when the steal clock is read, else why not.
    steal: Result<i64, String>,
    live: Arc<stats::LiveCostCell>,
    identity: Identity,
    /// Emptied batches back to the drain thread (see `recycle`).
    recycled: Sender<ProbeBatch>,
    /// A beat after each drain (see `wait_drained`).
    drained: Receiver<()>,
}

impl ProbeSession {
    /// Starts the drain thread, which loads and attaches the programs; returns once they are
    /// attached (or with the reason they could not be), plus the channel of record batches.
    pub fn start(cfg: ProbeConfig) -> Result<(ProbeSession, Receiver<ProbeBatch>), ProbeError> {
        check_kernel(std::path::Path::new("/sys/kernel/btf/vmlinux"))?;
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let (batch_tx, batch_rx) = mpsc::channel();
        let (recycled, recycled_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        // One beat pending at most: a collector that missed several takes one turn for all.
        let (drained_tx, drained) = mpsc::sync_channel(1);
        let live = Arc::new(stats::LiveCostCell::default());
        let live_thread = live.clone();
        let batches = drain::Batches {
            out: batch_tx,
            recycled: recycled_rx,
            drained: drained_tx,
        };
        let thread = std::thread::Builder::new()
            .name("js-probe-drain".into())
            .spawn(move || drain::run(cfg, cmd_rx, batches, ready_tx, live_thread))
            .map_err(|e| ProbeError::Other {
                action: "start the BPF drain thread".into(),
                cause: e.to_string(),
            })?;
        match ready_rx.recv() {
            Ok(Ok(Loaded {
                attach,
                steal,
                identity,
                ..
            })) => Ok((
                ProbeSession {
                    commands: cmd_tx,
                    thread: Some(thread),
                    attach,
                    steal,
                    live,
                    identity,
                    recycled,
                    drained,
                },
                batch_rx,
            )),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(ProbeError::ThreadGone),
            },
        }
    }

    /// Hands an emptied batch back to the drain thread, which fills it again instead of
    /// allocating another: a batch freed by the thread that took it in went back to the drain
    /// thread's heap, where thousands a second under a storm piled up for its allocator to
    /// sort (500 µs in one `malloc`).
    pub fn recycle(&self, mut batch: ProbeBatch) {
        batch.clear();
        let _ = self.recycled.send(batch);
    }

    /// When the last drain that emptied the rings began (CLOCK_MONOTONIC; 0: none yet): every
    /// record committed before it has been sent.
    pub fn emptied_at(&self) -> u64 {
        self.live
            .emptied_at
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits until the drain thread has finished a drain since the last call, or `timeout`
    /// passed; true if it did. A collector that takes its turn right after each drain, on the
    /// CPU the drain thread shares with the workload, interrupts the measured thread once per
    /// drain instead of twice, and decides what was just drained. With the drain thread gone,
    /// it still waits `timeout` (a caller in a loop must not spin on a measured CPU).
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        match self.drained.recv_timeout(timeout) {
            Ok(()) => true,
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(timeout);
                false
            }
        }
    }

    /// BPF cost so far (refreshed at most once a second while asked for), None when
    /// statistics are unavailable or before the first refresh.
    pub fn live_cost(&self) -> Option<LiveCost> {
        self.live.look()
    }

    /// Where the run's window begins (CLOCK_MONOTONIC): the kernel time is counted from it.
    /// 0 (before it is set, or again once a run deciding at the end outgrew its rings):
    /// nothing is glanced at or counted.
    pub fn set_window_from(&self, from_ns: u64) {
        self.live.set_window_from(from_ns);
    }

    pub fn attach_report(&self) -> &[AttachStatus] {
        &self.attach
    }

    /// True when the probes read the KVM steal clock (see `ProbeSummary::steal_clock`).
    pub fn steal_clock(&self) -> bool {
        self.steal.is_ok()
    }

    /// Why there is no steal clock, one line; None when there is.
    pub fn steal_clock_note(&self) -> Option<&str> {
        self.steal.as_ref().err().map(String::as_str)
    }

    /// jitterscope's process id in the kernel's numbering: what the probes class as `self`
    /// and what task pids in records are numbered like (not `getpid()` in a PID namespace).
    pub fn kernel_pid(&self) -> u32 {
        self.identity.tgid
    }

    /// The way workload threads register themselves, each from its own context.
    pub fn registrar(&self) -> ThreadRegistrar {
        ThreadRegistrar {
            whoami: self.identity.whoami.clone(),
            commands: self.commands.clone(),
        }
    }

    /// Tells the programs which threads are the workload's (their runs are not
    /// interruptions). The tids are the kernel's (init PID namespace) numbers; from inside a
    /// namespace use `registrar`.
    pub fn set_workload_tids(&self, tids: &[u32]) -> Result<(), ProbeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::SetWorkloadTids(tids.to_vec(), tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)?
    }

    /// Every task visible in jitterscope's PID namespace, with its kernel ids (watch mode).
    pub fn list_tasks(&self) -> Result<Vec<watch::TaskRow>, ProbeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::ListTasks(tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)?
    }

    /// Watches these threads (kernel tids) from now on, and with `follow` (a kernel tgid) the
    /// threads that process creates (watch mode).
    pub fn watch_threads(
        &self,
        tids: &[u32],
        follow: Option<u32>,
    ) -> Result<watch::Added, ProbeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::Watch(tids.to_vec(), follow, tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)?
    }

    /// Watches the threads created in, or moved into, a v2 cgroup (its id) at depth `level`
    /// or its descendants from now on (watch mode); the threads already there are given to
    /// `watch_threads`.
    pub fn watch_cgroup(&self, id: u64, level: u32) -> Result<(), ProbeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::WatchCgroup(id, level, tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)?
    }

    /// Detaches, drains what is left and returns the counters.
    pub fn stop(mut self) -> Result<ProbeSummary, ProbeError> {
        let _ = self.commands.send(Command::Stop);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(ProbeError::ThreadGone),
        }
    }
}

impl Drop for ProbeSession {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_buffer_sizes_round_up_to_a_power_of_two_page_multiple() {
        assert_eq!(ringbuf_size(8 << 20), (8 << 20, false));
        assert_eq!(ringbuf_size(5 << 20), (8 << 20, true));
        assert_eq!(ringbuf_size(4096), (4096, false));
        assert_eq!(ringbuf_size(6000), (8192, true));
        assert_eq!(ringbuf_size(1), (4096, true));
        assert_eq!(ringbuf_size(u64::MAX), (1 << 30, true));
    }
}
