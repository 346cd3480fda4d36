//! The kernel's BPF run-time statistics: switched on for as long as jitterscope holds the fd
//! `BPF_ENABLE_STATS` gives (owned, so every way out closes it; no global sysctl to restore),
//! and read back as each program's run count and run time.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libbpf_rs::skel::Skel;

use super::load::{tracepoint_of, FLOOR_PREFIX};
use super::JitterscopeSkel;
use crate::platform::pace::Pacer;

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

/// Totals of the programs' costs so far, refreshed by the drain thread once a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCost {
    pub events: u64,
    pub run_time_ns: u64,
}

impl LiveCost {
    fn of(costs: &[ProgramCost]) -> LiveCost {
        LiveCost {
            events: costs.iter().map(|c| c.run_count).sum(),
            run_time_ns: costs.iter().map(|c| c.run_time_ns).sum(),
        }
    }
}

/// The totals the live view shows, refreshed by the drain thread only while somebody looks:
/// reading them is a system call per program, and a run without the live view (plain lines,
/// a watch) would pay for them every second on a CPU it may share with the workload.
#[derive(Debug, Default)]
pub struct LiveCostCell {
    cost: Mutex<Option<LiveCost>>,
    /// Set by a look, cleared by the refresh that answers it.
    wanted: AtomicBool,
    /// Where the run's window begins (CLOCK_MONOTONIC), once the collector said so.
    window_from: AtomicU64,
    /// When the last drain that emptied the rings began (`ProbeSession::emptied_at`).
    pub(super) emptied_at: AtomicU64,
}

impl LiveCostCell {
    /// The run's window begins at `from_ns`: the live preview counts from there.
    pub fn set_window_from(&self, from_ns: u64) {
        self.window_from.store(from_ns, Ordering::Relaxed);
    }

    /// Where the window begins, as the collector said (0: not yet).
    pub(super) fn window_from(&self) -> u64 {
        self.window_from.load(Ordering::Relaxed)
    }

    /// The totals of the latest refresh (None before the first), asking for the next one.
    pub fn look(&self) -> Option<LiveCost> {
        self.wanted.store(true, Ordering::Relaxed);
        self.cost.lock().ok().and_then(|l| *l)
    }
}

/// Run-time statistics, on while this lives.
pub(super) struct RunTimeStats {
    _enabled: OwnedFd,
    next_refresh: Instant,
}

impl RunTimeStats {
    /// None when the kernel refused (statistics need CAP_SYS_ADMIN) or lacks them.
    pub(super) fn enable() -> Option<RunTimeStats> {
        // SAFETY: plain syscall wrapper; a negative result means unsupported or refused.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        (fd >= 0).then(|| RunTimeStats {
            // SAFETY: a new fd that nothing else owns or closes.
            _enabled: unsafe { OwnedFd::from_raw_fd(fd) },
            next_refresh: Instant::now() + Duration::from_secs(1),
        })
    }

    /// Puts the totals so far in `live` when it was looked at since the last refresh, at most
    /// once a second (called after every drain), a few programs between two looks at `pacer`
    /// (a system call each).
    pub(super) fn refresh(
        &mut self,
        skel: &JitterscopeSkel,
        live: &LiveCostCell,
        pacer: &mut Pacer,
    ) {
        let now = Instant::now();
        if now < self.next_refresh || !live.wanted.load(Ordering::Relaxed) {
            return;
        }
        self.next_refresh = now + Duration::from_secs(1);
        live.wanted.store(false, Ordering::Relaxed);
        let costs = costs_of(skel, false, &mut || {
            pacer.between();
        });
        if let Ok(mut l) = live.cost.lock() {
            *l = Some(LiveCost::of(&costs));
        }
    }
}

/// Run count and run time of every loaded tracing program (kernel BPF run-time statistics),
/// named by tracepoint; the reference programs are not among them (`floor_costs`).
pub(super) fn program_costs(skel: &JitterscopeSkel) -> Vec<ProgramCost> {
    costs_of(skel, false, &mut || {})
}

/// The reference programs' costs (`ProbeConfig::floor`), named `empty`, `clock`,
/// `timer_empty` and `timer_clock`.
pub(super) fn floor_costs(skel: &JitterscopeSkel) -> Vec<ProgramCost> {
    costs_of(skel, true, &mut || {})
}

/// Programs asked about between two calls of `costs_of`'s pace.
const PROGRAMS_PER_STEP: usize = 4;

fn costs_of(skel: &JitterscopeSkel, floor: bool, pace: &mut dyn FnMut()) -> Vec<ProgramCost> {
    let mut out = Vec::new();
    for (n, prog) in skel.object().progs().enumerate() {
        // From the first: what came before it is not known to have left room.
        if n % PROGRAMS_PER_STEP == 0 {
            pace();
        }
        // Test runs (js_whoami, the seams) are not the cost of tracing.
        if !prog.autoload() || prog.section().to_string_lossy().starts_with("raw_tp") {
            continue;
        }
        let name = prog.name().to_string_lossy();
        let reference = name.strip_prefix(FLOOR_PREFIX);
        if reference.is_some() != floor {
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
                program: match reference {
                    Some(r) => r.to_string(),
                    None => tracepoint_of(&prog.section().to_string_lossy()).to_string(),
                },
                run_count: info.run_cnt,
                run_time_ns: info.run_time_ns,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_asks_for_the_next_refresh_and_sees_the_last() {
        let cell = LiveCostCell::default();
        assert!(!cell.wanted.load(Ordering::Relaxed), "nobody looked yet");
        assert_eq!(cell.look(), None, "nothing refreshed yet");
        assert!(cell.wanted.load(Ordering::Relaxed));
        let cost = LiveCost {
            events: 3,
            run_time_ns: 300,
        };
        *cell.cost.lock().unwrap() = Some(cost);
        assert_eq!(cell.look(), Some(cost));
    }
}
