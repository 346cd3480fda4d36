//! What the machine is and how it is set: CPUs, their state, the kernel.

pub mod actions;
pub mod claim;
pub mod cpus;
pub mod cputime;
pub mod hold;
pub mod tuning;

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// True when the CPU says it runs under a hypervisor (the `hypervisor` flag).
pub fn is_virtual_machine() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines()
                .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
        })
        .unwrap_or(false)
}

/// After a burst of kernel records the collector's heap holds many freed small blocks (the
/// records' names); glibc keeps their pages until `malloc_trim` releases the free ones. Doing
/// it every few seconds, on the collector's housekeeping CPU, keeps a long run's resident
/// memory at what it holds, not at its worst moment.
pub fn give_back_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks and releases the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
