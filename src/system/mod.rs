//! What the machine is and how it is set: CPUs, their state, the kernel.

pub mod actions;
pub mod cgroup;
pub mod claim;
pub mod config;
pub mod container;
pub mod counters;
pub mod cpus;
pub mod cputime;
pub mod hold;
pub mod kubelet;
pub mod tuning;

use crate::platform::input;

/// `uname -r`.
pub fn kernel_release() -> String {
    input::read_proc("/proc/sys/kernel/osrelease", input::PROC_FILE)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The host name.
pub fn host_name() -> String {
    input::read_proc("/proc/sys/kernel/hostname", input::PROC_FILE)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// True when the CPU says it runs under a hypervisor (the `hypervisor` flag).
pub fn is_virtual_machine() -> bool {
    input::read_proc("/proc/cpuinfo", input::PROC_TABLE).is_some_and(|t| {
        t.lines()
            .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
    })
}

/// The allocator's part of `hold_memory_in_place`: allocations below 32 MiB come from its
/// heaps, and freed memory stays there (no `munmap`, no trim). Set before the threads of a
/// run start, so that the room they make in their heaps (`platform::heap`) stays too. A heap
/// that must still grow (a storm's backlog outgrowing the room) grows by what is asked and no
/// more (no top pad; glibc's is 128 KiB): under `mlockall` the kernel populates the growth in
/// the system call, microseconds a page, so a padded growth is one long slice on a CPU it
/// may share with the workload; the collector's `HeapKeeper` grows its heap ahead of need,
/// in steps of two pages.
pub fn keep_allocations_in_place() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; the values are within glibc's ranges
    // (the mmap threshold at most 32 MiB on 64-bit).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_TOP_PAD, 0);
    }
}

/// Keeps this process's memory where it is while the workload records: every page it maps
/// from now on is populated and locked when mapped (`mlockall(MCL_CURRENT|MCL_FUTURE)`), and
/// the allocator never hands memory back (no `munmap`, no trim). The workload's spinning
/// threads share this address space: a page first read and later written (a copy-on-write
/// fault replacing the zero page), an unmap or a trim changes page tables of an address
/// space that is live on the measured CPUs, and the kernel flushes their TLBs with an IPI —
/// jitterscope interrupting what it measures. Returns why the memory could not be locked
/// (RLIMIT_MEMLOCK without CAP_IPC_LOCK), None when it is.
pub fn hold_memory_in_place() -> Option<String> {
    keep_allocations_in_place();
    // SAFETY: mlockall takes flags only.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    (rc != 0).then(|| {
        let e = std::io::Error::last_os_error();
        format!(
            "mlockall: {e} (RLIMIT_MEMLOCK is {}; root or CAP_IPC_LOCK lifts it)",
            memlock_limit()
        )
    })
}

fn memlock_limit() -> String {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return "unknown".into();
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", r.rlim_cur / 1024)
    }
}

/// Ends `hold_memory_in_place` once the workload's threads have stopped: the pages are
/// unlocked (work the process's exit would do otherwise). What the allocator holds free stays
/// with it: a run's process ends after its report, and its exit takes the memory back at no
/// extra cost; `trim_memory` hands it back earlier, for a process that goes on.
pub fn release_memory() {
    // SAFETY: munlockall takes no arguments; it only unlocks this process's pages.
    unsafe {
        libc::munlockall();
    }
}

/// Hands the allocator's free memory back to the kernel (`malloc_trim`): after a run, in a
/// process that goes on to other work (the workshop's next step). Some milliseconds after a
/// run; not worth it in a process about to exit.
pub fn trim_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks and releases the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
