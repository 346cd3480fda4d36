//! Thread placement: pinning the calling thread to one CPU, its kernel thread id, and the
//! CPU it is on.

use crate::model::Cpu;

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: Cpu) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes within its fixed size (checked below).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> std::io::Result<Vec<Cpu>> {
    // SAFETY: as above; sched_getaffinity fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as Cpu)
            .collect())
    }
}

/// The CPUs thread `tid` may run on (any thread of any process we may inspect).
pub fn thread_cpus(tid: u32) -> std::io::Result<Vec<Cpu>> {
    // SAFETY: as above, for another thread id.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as Cpu)
            .collect())
    }
}

/// Restricts the calling thread to `cpus` (used to keep helper threads off measured CPUs).
pub fn set_current_thread_cpus(cpus: &[Cpu]) -> std::io::Result<()> {
    set_thread_cpus(0, cpus)
}

/// Restricts thread `tid` (0: the calling thread) to `cpus`.
pub fn set_thread_cpus(tid: u32, cpus: &[Cpu]) -> std::io::Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    if unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The set of `cpus` (those beyond the set's fixed size left out).
fn cpu_set(cpus: &[Cpu]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if (cpu as usize) < libc::CPU_SETSIZE as usize {
            // SAFETY: the index is within the set (checked above).
            unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        }
    }
    set
}

/// Gives the program `cmd` starts the CPUs in `cpus` (set in the child between fork and
/// exec), so that a command jitterscope starts runs where the user's shell would have run it,
/// not on the housekeeping CPUs jitterscope's own threads moved to.
pub fn spawn_on(
    cmd: &mut std::process::Command,
    cpus: &[Cpu],
) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    // Built here, before the fork.
    let set = cpu_set(cpus);
    // SAFETY: the closure runs between fork and exec, where only async-signal-safe calls
    // are allowed: sched_setaffinity is one system call on the copied set, no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// The calling thread's id in this process's PID namespace: what sched_setaffinity and /proc
/// take here. sched_switch reports the init namespace's number, the same only outside
/// containers (the probes learn that one themselves).
pub fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// The CPU the calling thread runs on right now (vDSO, no syscall on x86).
#[inline]
pub fn current_cpu() -> Cpu {
    // SAFETY: sched_getcpu has no preconditions; it returns -1 only where unsupported.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as Cpu
}

/// Puts the calling thread's CPU affinity back on drop (the collector moves to the
/// housekeeping CPUs for a run and gets its own back afterwards).
pub struct AffinityGuard(Option<Vec<Cpu>>);

impl AffinityGuard {
    /// Remembers the calling thread's CPUs now.
    pub fn remember() -> Self {
        AffinityGuard(allowed_cpus().ok())
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        if let Some(cpus) = &self.0 {
            let _ = set_current_thread_cpus(cpus);
        }
    }
}

/// Names the calling thread (`comm`, at most 15 bytes shown), as `ps` and the probes see it.
pub fn name_current_thread(name: &str) {
    let c = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: PR_SET_NAME copies at most 16 bytes from a valid NUL-terminated string.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Makes the calling thread SCHED_FIFO at `priority` (1-99): it then runs until it blocks,
/// yields to a higher priority, or RT throttling (`kernel.sched_rt_runtime_us`) takes the CPU
/// from it.
pub fn set_current_thread_fifo(priority: u8) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority.into(),
    };
    // SAFETY: sets this thread's policy; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
