//! The kernel half's user-space side: opens the BPF skeleton, sets its CPU filter, loads and
//! attaches every program this kernel has, then drains the ring buffer on a timer from a
//! thread pinned to a housekeeping CPU and hands decoded records over a channel.
//!
//! The skeleton borrows its object storage, so one thread owns all of it from open to
//! detach; the session talks to it through channels.

pub mod abi;
pub mod census;
pub mod decode;
pub mod kallsyms;
pub mod steal;

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

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{ErrorKind, RingBufferBuilder};

use crate::model::Cpu;
use abi::Whoami;
use decode::Record;
use kallsyms::Kallsyms;

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

#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub cpus: Vec<Cpu>,
    /// Ring-buffer size in bytes: a power-of-two number of pages (`ringbuf_size` rounds).
    pub ringbuf_bytes: u32,
    pub drain_interval: Duration,
    /// Where the drain thread runs (a housekeeping CPU), None to leave it unpinned.
    pub drain_cpus: Vec<Cpu>,
    /// Also load the raw_tp test seams (tests only).
    pub test_seams: bool,
}

impl ProbeConfig {
    pub fn new(cpus: Vec<Cpu>) -> Self {
        ProbeConfig {
            cpus,
            ringbuf_bytes: 8 << 20,
            drain_interval: Duration::from_millis(50),
            drain_cpus: Vec::new(),
            test_seams: false,
        }
    }
}

/// The section of `js_whoami`, the program that tells a thread its kernel ids: always loaded,
/// never attached.
const WHOAMI_SECTION: &str = "raw_tp";

/// Rounds a requested ring-buffer size to what the kernel accepts: a power of two, at least
/// one page. Returns the size and whether it was changed.
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

/// Cost of one program, from the kernel's BPF run-time statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramCost {
    pub program: String,
    pub run_count: u64,
    pub run_time_ns: u64,
}

impl ProgramCost {
    pub fn ns_per_event(&self) -> Option<f64> {
        (self.run_count > 0).then(|| self.run_time_ns as f64 / self.run_count as f64)
    }
}

/// What a session leaves behind when stopped.
#[derive(Debug, Clone, Default)]
pub struct ProbeSummary {
    /// Failed ring-buffer reserves, per CPU (only CPUs with drops).
    pub drops: Vec<(Cpu, u64)>,
    /// Records submitted per measured CPU.
    pub events: Vec<(Cpu, u64)>,
    pub costs: Vec<ProgramCost>,
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

/// Asks `js_whoami` (see the BPF code) about the calling thread. A PID namespace numbers
/// threads its own way (`getpid()` is 1 in a container); the programs compare with the
/// kernel's numbers, which only a program run in the thread's own context can tell.
fn whoami(prog: BorrowedFd<'_>, question: Whoami) -> Result<u32, ProbeError> {
    let ctx = (question as u64).to_ne_bytes();
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        ctx_in: ctx.as_ptr().cast(),
        ctx_size_in: ctx.len() as u32,
        ..Default::default()
    };
    // SAFETY: `opts` is a properly sized bpf_test_run_opts whose only input buffer (`ctx`)
    // outlives the call; without BPF_F_TEST_RUN_ON_CPU the program runs in this thread.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc != 0 {
        return Err(ProbeError::Identity {
            what: match question {
                Whoami::Tgid => "jitterscope's process id",
                Whoami::Tid => "a workload thread's id",
            },
            cause: std::io::Error::from_raw_os_error(-rc).to_string(),
        });
    }
    Ok(opts.retval)
}

/// Registers workload threads with the probes, each from the thread itself (its kernel id is
/// known only there). Cheap to clone and usable from any thread while the session runs.
#[derive(Clone)]
pub struct ThreadRegistrar {
    whoami: Arc<OwnedFd>,
    commands: Sender<Command>,
}

impl ThreadRegistrar {
    /// Puts the calling thread in the probes' workload table (its runs stop being
    /// interruptions from now on) and returns its thread id in the kernel's numbering.
    pub fn register_current_thread(&self) -> Result<u32, ProbeError> {
        let tid = whoami(self.whoami.as_fd(), Whoami::Tid)?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::SetWorkloadTids(vec![tid], tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)??;
        Ok(tid)
    }
}

/// Decoded records of one drain.
pub type ProbeBatch = Vec<Record>;

enum Command {
    SetWorkloadTids(Vec<u32>, SyncSender<Result<(), ProbeError>>),
    Stop,
}

pub struct ProbeSession {
    commands: Sender<Command>,
    thread: Option<JoinHandle<Result<ProbeSummary, ProbeError>>>,
    attach: Vec<AttachStatus>,
    /// Ok when the steal clock is read, else why not.
    steal: Result<i64, String>,
    live: Arc<Mutex<Option<LiveCost>>>,
    identity: Identity,
}

/// How the kernel knows this process: what `self` is compared with, and the program that
/// answers a thread's "who am I".
struct Identity {
    tgid: u32,
    whoami: Arc<OwnedFd>,
}

/// What loading found, sent from the drain thread to `start`.
struct Loaded {
    attach: Vec<AttachStatus>,
    steal: Result<i64, String>,
    identity: Identity,
}

/// libbpf's log lines, kept so that a verifier rejection can show its last lines.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn capture_libbpf_log() {
    libbpf_rs::set_print(Some((
        libbpf_rs::PrintLevel::Debug,
        |level, msg: String| {
            if let Ok(mut log) = LIBBPF_LOG.lock() {
                if level != libbpf_rs::PrintLevel::Debug
                    || msg.contains("verif")
                    || log.len() < 2000
                {
                    log.push(msg.trim_end().to_string());
                }
                let excess = log.len().saturating_sub(4000);
                log.drain(..excess);
            }
        },
    )));
}

fn last_log_lines(n: usize) -> String {
    let log = LIBBPF_LOG.lock().map(|l| l.clone()).unwrap_or_default();
    let start = log.len().saturating_sub(n);
    log[start..].join("\n")
}

/// The kernel lockdown mode when it restricts BPF (`confidentiality`), from the text of
/// /sys/kernel/security/lockdown (`none integrity [confidentiality]`).
pub fn bpf_lockdown(text: &str) -> Option<String> {
    let mode = text.split_whitespace().find(|w| w.starts_with('['))?;
    let mode = mode.trim_matches(|c| c == '[' || c == ']');
    (mode == "confidentiality").then(|| mode.to_string())
}

/// What must hold before loading is tried: the kernel's BTF.
pub fn check_kernel(btf: &std::path::Path) -> Result<(), ProbeError> {
    if btf.exists() {
        Ok(())
    } else {
        Err(ProbeError::NoBtf)
    }
}

/// The kernel refused with EPERM: lockdown when it is on (root cannot lift it), else
/// missing privileges. `lockdown` is the content of /sys/kernel/security/lockdown.
pub fn permission_error(lockdown: Option<&str>) -> ProbeError {
    match lockdown.and_then(bpf_lockdown) {
        Some(mode) => ProbeError::Lockdown { mode },
        None => ProbeError::Permission {
            errno: "EPERM".into(),
        },
    }
}

fn refused() -> ProbeError {
    permission_error(
        std::fs::read_to_string("/sys/kernel/security/lockdown")
            .ok()
            .as_deref(),
    )
}

fn classify_load_error(e: &libbpf_rs::Error) -> ProbeError {
    let log = last_log_lines(25);
    // The verifier refuses with EACCES too: its log, not the errno, tells it from privilege.
    let verifier = log.contains("processed") || log.contains("R0") || log.contains("invalid");
    match e.kind() {
        ErrorKind::PermissionDenied if !verifier => refused(),
        _ => {
            if verifier {
                ProbeError::Verifier {
                    cause: e.to_string(),
                    log,
                }
            } else {
                ProbeError::Other {
                    action: "load the BPF programs".into(),
                    cause: format!("{e:#}\n{log}"),
                }
            }
        }
    }
}

/// The tracepoint a program is attached to, from its section (`tp_btf/sched_switch`).
fn tracepoint_of(section: &str) -> &str {
    section.rsplit('/').next().unwrap_or(section)
}

impl ProbeSession {
    /// Starts the drain thread, which loads and attaches the programs; returns once they are
    /// attached (or with the reason they could not be), plus the channel of record batches.
    pub fn start(cfg: ProbeConfig) -> Result<(ProbeSession, Receiver<ProbeBatch>), ProbeError> {
        check_kernel(std::path::Path::new("/sys/kernel/btf/vmlinux"))?;
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let (batch_tx, batch_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let live = Arc::new(Mutex::new(None));
        let live_thread = live.clone();
        let thread = std::thread::Builder::new()
            .name("js-probe-drain".into())
            .spawn(move || drain_thread(cfg, cmd_rx, batch_tx, ready_tx, live_thread))
            .map_err(|e| ProbeError::Other {
                action: "start the BPF drain thread".into(),
                cause: e.to_string(),
            })?;
        match ready_rx.recv() {
            Ok(Ok(Loaded {
                attach,
                steal,
                identity,
            })) => Ok((
                ProbeSession {
                    commands: cmd_tx,
                    thread: Some(thread),
                    attach,
                    steal,
                    live,
                    identity,
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

    /// BPF cost so far (refreshed once a second), None when statistics are unavailable.
    pub fn live_cost(&self) -> Option<LiveCost> {
        self.live.lock().ok().and_then(|l| *l)
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

fn other(action: &str) -> impl Fn(libbpf_rs::Error) -> ProbeError + '_ {
    move |e| ProbeError::Other {
        action: action.to_string(),
        cause: format!("{e:#}"),
    }
}

type Attached<'obj> = (JitterscopeSkel<'obj>, Vec<libbpf_rs::Link>, Loaded);

fn load_and_attach<'obj>(
    cfg: &ProbeConfig,
    syms: &Kallsyms,
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
) -> Result<Attached<'obj>, ProbeError> {
    capture_libbpf_log();
    let btf = libbpf_rs::btf::Btf::from_vmlinux().map_err(|_| ProbeError::NoBtf)?;
    let mut open = JitterscopeSkelBuilder::default()
        .open(storage)
        .map_err(|e| classify_load_error(&e))?;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .ok_or(ProbeError::Other {
            action: "set the CPU filter".into(),
            cause: "the BPF object's rodata is not memory-mapped".into(),
        })?;
    for &cpu in &cfg.cpus {
        if (cpu as usize) < rodata.target_cpus.len() * 64 {
            rodata.target_cpus[cpu as usize / 64] |= 1 << (cpu % 64);
        }
    }
    rodata.hrtimer_wakeup_fn = syms.address_of("hrtimer_wakeup").unwrap_or(0);
    let steal = steal::status(steal::percpu_offsets(&btf), steal::host());
    rodata.steal_clock = steal.is_ok();
    rodata.steal_time_from_rq = *steal.as_ref().unwrap_or(&0);
    open.maps
        .events
        .set_max_entries(cfg.ringbuf_bytes)
        .map_err(other("size the ring buffer"))?;
    let mut attach = Vec::new();
    for mut prog in open.open_object_mut().progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        let tp = tracepoint_of(&section).to_string();
        if section == WHOAMI_SECTION {
            continue;
        }
        if section.starts_with("raw_tp/") {
            prog.set_autoload(cfg.test_seams);
            continue;
        }
        let present = btf
            .type_by_name::<libbpf_rs::btf::types::Typedef>(&format!("btf_trace_{tp}"))
            .is_some();
        if !present {
            if MANDATORY.contains(&tp.as_str()) {
                return Err(ProbeError::Attach {
                    tracepoint: tp,
                    cause: "this kernel has no such tracepoint".into(),
                });
            }
            prog.set_autoload(false);
            attach.push(AttachStatus {
                tracepoint: tp,
                state: AttachState::Unavailable("not in this kernel".into()),
            });
        }
    }
    let mut skel = open.load().map_err(|e| classify_load_error(&e))?;
    let identity = learn_identity(&mut skel)?;
    let mut links = Vec::new();
    for prog in skel.object().progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        if !prog.autoload() || section.starts_with("raw_tp") {
            continue;
        }
        let tp = tracepoint_of(&section).to_string();
        match prog.attach() {
            Ok(link) => {
                links.push(link);
                attach.push(AttachStatus {
                    tracepoint: tp,
                    state: AttachState::Attached,
                });
            }
            Err(e) if MANDATORY.contains(&tp.as_str()) => {
                return Err(if e.kind() == ErrorKind::PermissionDenied {
                    refused()
                } else {
                    ProbeError::Attach {
                        tracepoint: tp,
                        cause: format!("{e:#}"),
                    }
                })
            }
            Err(e) => attach.push(AttachStatus {
                tracepoint: tp,
                state: AttachState::Unavailable(format!("{e:#}")),
            }),
        }
    }
    attach.sort_by(|a, b| a.tracepoint.cmp(&b.tracepoint));
    Ok((
        skel,
        links,
        Loaded {
            attach,
            steal,
            identity,
        },
    ))
}

/// Learns this process's kernel id and sets `self_tgid` with it, before anything is attached.
fn learn_identity(skel: &mut JitterscopeSkel) -> Result<Identity, ProbeError> {
    let whoami_fd = skel
        .progs
        .js_whoami
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| ProbeError::Other {
            action: "keep the js_whoami program".into(),
            cause: e.to_string(),
        })?;
    let tgid = whoami(whoami_fd.as_fd(), Whoami::Tgid)?;
    match skel.maps.bss_data.as_deref_mut() {
        Some(bss) => bss.self_tgid = tgid,
        None => {
            return Err(ProbeError::Other {
                action: "tell the probes jitterscope's own process id".into(),
                cause: "the BPF object's .bss is not memory-mapped".into(),
            })
        }
    }
    Ok(Identity {
        tgid,
        whoami: Arc::new(whoami_fd),
    })
}

/// Fills the BPF side's 2-way set-associative tid table (see `is_workload` in the BPF code).
pub fn register_tids(table: &mut [u32], tids: &[u32]) -> Result<(), String> {
    let sets = table.len() / 2;
    for &tid in tids {
        let set = (tid as usize & (sets - 1)) * 2;
        if table[set] == tid || table[set + 1] == tid {
            continue;
        }
        let slot = if table[set] == 0 {
            set
        } else if table[set + 1] == 0 {
            set + 1
        } else {
            return Err(format!(
                "thread {tid} collides with threads {} and {} in the probes' table",
                table[set],
                table[set + 1]
            ));
        };
        // SAFETY: a plain aligned u32 store into memory the BPF programs read concurrently.
        unsafe { std::ptr::write_volatile(&mut table[slot], tid) };
    }
    Ok(())
}

/// Run count and run time of every loaded program (kernel BPF run-time statistics).
fn program_costs(skel: &JitterscopeSkel) -> Vec<ProgramCost> {
    let mut out = Vec::new();
    for prog in skel.object().progs() {
        // Test runs (js_whoami, the seams) are not the cost of tracing.
        if !prog.autoload() || prog.section().to_string_lossy().starts_with("raw_tp") {
            continue;
        }
        let mut info = libbpf_sys::bpf_prog_info::default();
        let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
        // SAFETY: `info` is a properly sized, writable bpf_prog_info; `len` says its size.
        let rc = unsafe {
            libbpf_sys::bpf_prog_get_info_by_fd(
                prog.as_fd().as_raw_fd(),
                &mut info as *mut _ as *mut _,
                &mut len,
            )
        };
        if rc == 0 {
            out.push(ProgramCost {
                program: tracepoint_of(&prog.section().to_string_lossy()).to_string(),
                run_count: info.run_cnt,
                run_time_ns: info.run_time_ns,
            });
        }
    }
    out
}

/// Maps in every page of the ring buffer's read-only data mapping (its producer page and the
/// data area, mapped twice), found in /proc/self/maps by its size. The kernel allocated those
/// pages when the map was created; touching them now only fills the page tables, so the
/// process's RSS shows the ring's real footprint from the start instead of creeping up to it
/// as the producer first writes each page (which looked like a leak in a soak).
fn prefault_ring(ringbuf_bytes: u32) {
    let page = 4096usize;
    let want = page + 2 * ringbuf_bytes as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines().filter(|l| l.ends_with("anon_inode:bpf-map")) {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if perms.starts_with("r--") && b - a == want {
            for addr in (a..b).step_by(page) {
                // SAFETY: `addr` lies inside a readable shared mapping of this process (from
                // /proc/self/maps) that lives as long as the ring buffer, which outlives this
                // call; a volatile read of one byte per page has no other effect.
                unsafe { std::ptr::read_volatile(addr as *const u8) };
            }
            return;
        }
    }
}

/// Totals of the programs' costs so far, refreshed by the drain thread once a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCost {
    pub events: u64,
    pub run_time_ns: u64,
}

fn drain_thread(
    cfg: ProbeConfig,
    commands: Receiver<Command>,
    batches: Sender<ProbeBatch>,
    ready: SyncSender<Result<Loaded, ProbeError>>,
    live: Arc<Mutex<Option<LiveCost>>>,
) -> Result<ProbeSummary, ProbeError> {
    if !cfg.drain_cpus.is_empty() {
        // Best effort: the drain thread belongs on a housekeeping CPU.
        let _ = crate::workload::affinity::set_current_thread_cpus(&cfg.drain_cpus);
    }
    // Symbols first: reading /proc/kallsyms takes a while, and records must flow from the
    // moment `start` returns.
    let mut syms = Kallsyms::load();
    let mut storage = MaybeUninit::uninit();
    let setup = load_and_attach(&cfg, &syms, &mut storage);
    let (mut skel, links, loaded) = match setup {
        Ok(x) => x,
        Err(e) => {
            // The error goes to `start`, which is waiting for it; nothing else to report.
            let _ = ready.send(Err(e));
            return Ok(ProbeSummary::default());
        }
    };
    // Run-time statistics while this fd is open (no global sysctl to restore).
    // SAFETY: plain syscall wrapper; a negative result means unsupported or refused.
    let stats_fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    let steal = loaded.steal.clone();
    let _ = ready.send(Ok(loaded));

    let pending: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = pending.clone();
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.events, move |data: &[u8]| {
            if let Ok(mut p) = sink.lock() {
                p.push(data.to_vec());
            }
            0
        })
        .map_err(other("read the ring buffer"))?;
    let ring = builder.build().map_err(other("read the ring buffer"))?;
    prefault_ring(cfg.ringbuf_bytes);
    let drain = |syms: &mut Kallsyms| {
        let _ = ring.consume();
        let raw = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        let batch: ProbeBatch = raw
            .iter()
            .filter_map(|d| decode::parse(d))
            .filter_map(|r| decode::decode(&r, syms))
            .collect();
        if !batch.is_empty() {
            let _ = batches.send(batch);
        }
    };

    let mut next = Instant::now() + cfg.drain_interval;
    let mut next_cost = Instant::now() + Duration::from_secs(1);
    loop {
        let timeout = next.saturating_duration_since(Instant::now());
        match commands.recv_timeout(timeout) {
            Ok(Command::SetWorkloadTids(tids, reply)) => {
                let r = match skel.maps.bss_data.as_deref_mut() {
                    Some(bss) => register_tids(&mut bss.workload_tids, &tids),
                    None => Err("the BPF object's .bss is not memory-mapped".to_string()),
                };
                let _ = reply.send(r.map_err(|cause| ProbeError::Other {
                    action: "register the workload threads with the probes".into(),
                    cause,
                }));
                continue;
            }
            Ok(Command::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        drain(&mut syms);
        next += cfg.drain_interval;
        if stats_fd >= 0 && Instant::now() >= next_cost {
            next_cost += Duration::from_secs(1);
            let costs = program_costs(&skel);
            if let Ok(mut l) = live.lock() {
                *l = Some(LiveCost {
                    events: costs.iter().map(|c| c.run_count).sum(),
                    run_time_ns: costs.iter().map(|c| c.run_time_ns).sum(),
                });
            }
        }
    }
    drop(links);
    drain(&mut syms);

    let mut summary = ProbeSummary {
        stats_enabled: stats_fd >= 0,
        symbols: !syms.is_empty(),
        steal_clock: steal.is_ok(),
        steal_clock_note: steal.err(),
        ..Default::default()
    };
    if let Some(bss) = skel.maps.bss_data.as_deref() {
        for &cpu in &cfg.cpus {
            if let Some(c) = bss.counters.get(cpu as usize) {
                // SAFETY: reading plain integers the kernel may still be updating.
                let c = unsafe { std::ptr::read_volatile(c) };
                summary.events.push((cpu, c.events));
                if c.rb_drops > 0 {
                    summary.drops.push((cpu, c.rb_drops));
                }
            }
            if let Some(&ns) = bss.steal_read.get(cpu as usize) {
                if ns > 0 {
                    summary.steal_clock_ns.push((cpu, ns));
                }
            }
        }
    }
    summary.costs = program_costs(&skel);
    if stats_fd >= 0 {
        // SAFETY: closing the fd bpf_enable_stats gave us.
        unsafe { libc::close(stats_fd) };
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_btf_lockdown_and_privileges_are_told_apart() {
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let missing = here.join("no-such-btf");
        let e = check_kernel(&missing).unwrap_err().to_string();
        assert!(e.contains("this kernel has no BTF"), "{e}");
        assert!(e.contains("CONFIG_DEBUG_INFO_BTF=y"), "{e}");
        assert!(check_kernel(here).is_ok());
        let e = permission_error(Some("none integrity [confidentiality]\n")).to_string();
        assert!(e.contains("locked down (confidentiality)"), "{e}");
        assert!(e.contains("--no-probes"), "{e}");
        // Integrity mode keeps BPF tracing; EPERM then means privileges.
        for text in [
            Some("none [integrity] confidentiality"),
            Some("[none] integrity confidentiality"),
            None,
        ] {
            let e = permission_error(text).to_string();
            assert!(e.contains("CAP_BPF+CAP_PERFMON"), "{text:?}: {e}");
        }
    }

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
