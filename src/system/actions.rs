//! The classic tuning steps, each through the `Tuner` (journalled, restored): IRQ affinity
//! away from the measured CPUs, the workqueue cpumask, `vm.stat_interval`, the CPU governor,
//! and cpuset shielding (the `cset shield` technique: every movable task into a cpuset of
//! housekeeping CPUs; cgroup v2 where it has the cpuset controller, v1 where only that is
//! mounted).

use crate::model::Cpu;
use crate::platform::input;
use crate::system::cpus::{cpumask_hex, format_list};
use crate::system::tuning::{Tuner, TuningError};

/// What a step did, for the report: done, and what the kernel refused (with why).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub done: Vec<String>,
    pub refused: Vec<String>,
}

/// Every IRQ that accepts it goes to `to`; kernel-managed ones refuse (EIO) and are listed.
pub fn move_irqs(t: &mut Tuner, to: &[Cpu]) -> Outcome {
    let mut out = Outcome::default();
    let list = format_list(to);
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    for irq in irqs {
        let path = format!("/proc/irq/{irq}/smp_affinity_list");
        if !std::path::Path::new(&path).exists() {
            continue;
        }
        match t.set(&path, &list) {
            Ok(()) => out.done.push(format!("IRQ {irq} → CPU {list}")),
            Err(e) => out.refused.push(format!("IRQ {irq}: {e}")),
        }
    }
    out
}

pub const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";

/// Unbound workqueue work runs only on `cpus` (bound per-CPU work stays where it was queued).
pub fn workqueue_cpumask(t: &mut Tuner, cpus: &[Cpu]) -> Result<String, TuningError> {
    let mask = cpumask_hex(cpus);
    t.set(WORKQUEUE_CPUMASK, &mask)?;
    Ok(format!(
        "unbound workqueues → CPU {} (mask {mask})",
        format_list(cpus)
    ))
}

pub const STAT_INTERVAL: &str = "/proc/sys/vm/stat_interval";

/// vmstat_update every `secs` seconds instead of every second.
pub fn stat_interval(t: &mut Tuner, secs: u32) -> Result<String, TuningError> {
    t.set(STAT_INTERVAL, &secs.to_string())?;
    Ok(format!("vm.stat_interval = {secs}"))
}

/// The `performance` governor on `cpus`, where cpufreq exists.
pub fn governor(t: &mut Tuner, cpus: &[Cpu], name: &str) -> Outcome {
    let mut out = Outcome::default();
    for &c in cpus {
        let path = format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
        if !std::path::Path::new(&path).exists() {
            out.refused.push(format!(
                "CPU {c}: no cpufreq driver ({path} is missing): the frequency is the hypervisor's or firmware's to set"
            ));
            continue;
        }
        match t.set(&path, name) {
            Ok(()) => out.done.push(format!("CPU {c} governor {name}")),
            Err(e) => out.refused.push(e.to_string()),
        }
    }
    out
}

/// Where cpusets live here: (root dir, tasks file, cgroup v2?).
pub fn cpuset_root() -> Option<(String, &'static str, bool)> {
    let v2 = "/sys/fs/cgroup";
    if input::read_proc(format!("{v2}/cgroup.controllers"), input::PROC_FILE)
        .is_some_and(|c| c.split_whitespace().any(|x| x == "cpuset"))
    {
        return Some((v2.into(), "cgroup.procs", true));
    }
    let mounts = input::read_proc("/proc/mounts", input::PROC_TABLE)?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset"))
            .then(|| (f[1].to_string(), "tasks", false))
    })
}

pub const SHIELD_NAME: &str = "jitterscope-system";

/// Moves this process out of jitterscope's shield (a `tune --shield` holds it) into the
/// cpuset root: a run started inside the shield needs the CPUs the shield keeps everything
/// else off. False when the process is not in the shield or cannot move.
pub fn leave_shield() -> bool {
    let Some((root, _, _)) = cpuset_root() else {
        return false;
    };
    let me = std::process::id().to_string();
    let members = input::read_proc(
        format!("{root}/{SHIELD_NAME}/cgroup.procs"),
        input::PROC_TABLE,
    )
    .unwrap_or_default();
    members.lines().any(|l| l.trim() == me) && join_cpuset(None).is_ok()
}

/// Moves this process into the cpuset `dir` (a cgroup directory), or into the cpuset
/// hierarchy's root; `cgroup.procs` (v1 and v2) moves every thread of the process.
pub fn join_cpuset(dir: Option<&std::path::Path>) -> Result<(), String> {
    let (root, _, _) = cpuset_root().ok_or("no cpuset hierarchy is mounted to move into")?;
    let dir = dir.map_or_else(|| std::path::PathBuf::from(&root), std::path::PathBuf::from);
    let file = dir.join("cgroup.procs");
    std::fs::write(&file, std::process::id().to_string())
        .map_err(|e| format!("cannot move into {}: {e}", file.display()))
}

/// Moves every movable task except this process into a cpuset of `housekeeping` CPUs, so
/// the measured CPUs run only the workload (and the per-CPU kernel threads that cannot move).
pub fn shield(t: &mut Tuner, housekeeping: &[Cpu]) -> Result<Outcome, String> {
    let (root, tasks, v2) = cpuset_root().ok_or(
        "no cpuset controller is mounted (neither cgroup v2 with cpuset nor a v1 cpuset hierarchy)",
    )?;
    let err = |e: TuningError| e.to_string();
    if v2 {
        let ctl = format!("{root}/cgroup.subtree_control");
        let current = input::read_proc(&ctl, input::PROC_FILE).unwrap_or_default();
        if !current.split_whitespace().any(|c| c == "cpuset") {
            std::fs::write(&ctl, "+cpuset")
                .map_err(|e| format!("cannot enable cpuset in {ctl}: {e}"))?;
        }
    }
    let dir = format!("{root}/{SHIELD_NAME}");
    let back_to = format!("{root}/{tasks}");
    t.create_cgroup(&dir, tasks, &back_to).map_err(err)?;
    t.set(&format!("{dir}/cpuset.cpus"), &format_list(housekeeping))
        .map_err(err)?;
    let mems = input::read_proc(format!("{root}/cpuset.mems"), input::PROC_FILE)
        .or_else(|| input::read_proc(format!("{root}/cpuset.mems.effective"), input::PROC_FILE))
        .unwrap_or_else(|| "0".into());
    if !v2 || !mems.trim().is_empty() {
        let _ = t.set(&format!("{dir}/cpuset.mems"), mems.trim());
    }
    let me = std::process::id();
    let own: Vec<String> = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let members = input::read_proc_or_error(&back_to, input::PROC_TABLE)
        .map_err(|e| format!("cannot read {back_to}: {e}"))?;
    let (mut moved, mut stayed, mut pinned) = (0usize, 0usize, Vec::new());
    let mut out = Outcome::default();
    for pid in members.lines().map(str::trim).filter(|p| !p.is_empty()) {
        if pid == me.to_string() || own.iter().any(|o| o == pid) {
            continue;
        }
        if std::fs::write(format!("{dir}/{tasks}"), pid).is_ok() {
            moved += 1;
            continue;
        }
        // Per-CPU kernel threads refuse (EINVAL, PF_NO_SETAFFINITY): they are the ones
        // nohz_full/isolcpus handle. kthreadd refuses a cpuset too, yet takes an affinity:
        // left alone, it and each kernel thread it forks start on the measured CPUs.
        let Some(pid) = pid.parse::<u32>().ok().filter(|&p| may_set_affinity(p)) else {
            stayed += 1;
            continue;
        };
        match t.set_affinity(pid, housekeeping) {
            Ok(()) => pinned.push(pid),
            Err(e) => out.refused.push(e.to_string()),
        }
    }
    out.done.push(format!(
        "{moved} tasks shielded into {dir} (CPU {})",
        format_list(housekeeping)
    ));
    for pid in pinned {
        let comm =
            input::read_proc(format!("/proc/{pid}/comm"), input::PROC_FILE).unwrap_or_default();
        out.done.push(format!(
            "{}[{pid}] (cannot join a cpuset) → CPU {} by its affinity",
            comm.trim(),
            format_list(housekeeping)
        ));
    }
    if stayed > 0 {
        out.refused.push(format!(
            "{stayed} per-CPU kernel threads stay (the kernel binds them to their CPU)"
        ));
    }
    Ok(out)
}

/// Whether the kernel lets user space set task `pid`'s CPUs: not for per-CPU kernel threads
/// (PF_NO_SETAFFINITY in `/proc/PID/stat`'s flags, field 9).
fn may_set_affinity(pid: u32) -> bool {
    const PF_NO_SETAFFINITY: u64 = 0x0400_0000;
    input::read_proc(format!("/proc/{pid}/stat"), input::PROC_FILE)
        .and_then(|stat| input::stat_field(&stat, 9))
        .is_some_and(|f| f & PF_NO_SETAFFINITY == 0)
}
