//! CPU time of this process and of its threads, for the tracer's own cost: everything
//! jitterscope burns except the workload's spinning threads.

/// CPU time of the whole process so far, threads that ended included.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of thread `tid` of this process (the scheduler's exact sum, from
/// `/proc/self/task/TID/schedstat`), None once the thread has ended.
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_shows_in_its_own_and_the_process_time() {
        let before = process_cpu_ns();
        let tid = unsafe { libc::gettid() } as u32;
        let mine = thread_cpu_ns(tid).unwrap();
        // Spin until the thread's own figure shows 20 ms (however loaded the machine is: no
        // assertion on speed), then the process figure must show them too.
        let t = std::time::Instant::now();
        while thread_cpu_ns(tid).unwrap() < mine + 20_000_000 {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "20 ms of spinning never showed in /proc/thread-self"
            );
            std::hint::spin_loop();
        }
        assert!(process_cpu_ns() >= before + 20_000_000);
    }
}
