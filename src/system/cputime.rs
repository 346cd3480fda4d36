//! CPU time of this process and of its threads, for the tracer's own cost: everything
//! jitterscope burns except the workload's spinning threads.

use crate::platform::clock::clock_ns;

/// CPU time of the whole process so far, threads that ended included.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of thread `tid` of this process (its id in this process's PID namespace), None
/// once the thread has ended. Read from the kernel's per-thread CPU clock (the clock id
/// `pthread_getcpuclockid` builds): the scheduler's exact sum, looked up by the namespace's
/// own tid — /proc may belong to another PID namespace (a container without its own /proc).
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    const CPUCLOCK_PERTHREAD_SCHED: libc::clockid_t = 4 | 2;
    let clock = (!(tid as libc::clockid_t) << 3) | CPUCLOCK_PERTHREAD_SCHED;
    // SAFETY: timespec is plain data; clock_gettime fills it or fails (EINVAL: no such
    // thread in this process).
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_shows_in_its_own_and_the_process_time() {
        let before = process_cpu_ns();
        let tid = unsafe { libc::gettid() } as u32;
        let mine = thread_cpu_ns(tid).unwrap();
        // Until the thread's clock shows 20 ms (a loaded machine may give it less than one
        // CPU); it must get there, and the process's clock with it.
        let t = std::time::Instant::now();
        while thread_cpu_ns(tid).unwrap() < mine + 20_000_000 {
            assert!(t.elapsed() < std::time::Duration::from_secs(30));
            std::hint::spin_loop();
        }
        assert!(process_cpu_ns() >= before + 20_000_000);
        // The same clock the scheduler shows in /proc (here /proc is this namespace's).
        let schedstat: u64 = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let clock = thread_cpu_ns(tid).unwrap();
        assert!(
            clock >= schedstat && clock - schedstat < 50_000_000,
            "clock {clock} schedstat {schedstat}"
        );
    }

    #[test]
    fn a_thread_that_ended_has_no_time() {
        let tid = std::thread::spawn(|| unsafe { libc::gettid() } as u32)
            .join()
            .unwrap();
        assert_eq!(thread_cpu_ns(tid), None);
    }
}
