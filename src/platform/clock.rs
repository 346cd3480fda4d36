//! CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` uses, so workload times and
//! kernel event times are directly comparable. glibc serves it from the vDSO (no syscall).

use crate::model::Nanos;

/// Reads CLOCK_MONOTONIC. Never fails on Linux for this clock id.
#[inline(always)]
pub fn monotonic_ns() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always supported.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads `clock` in ns; 0 when the clock cannot be read (a thread's clock once it ended).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ns.
pub fn own_thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Wall-clock time in nanoseconds since the Unix epoch (for run metadata only).
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The typical period of a tight loop that does nothing but read the clock: the median
/// gap between consecutive reads over `samples` reads. The default stall threshold is a
/// multiple of this.
pub fn loop_period_ns(samples: usize) -> Nanos {
    let samples = samples.max(16);
    let mut gaps = Vec::with_capacity(samples);
    let mut last = monotonic_ns();
    for _ in 0..samples {
        let now = monotonic_ns();
        gaps.push(now - last);
        last = now;
    }
    gaps.sort_unstable();
    gaps[gaps.len() / 2].max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_backwards() {
        let mut last = monotonic_ns();
        for _ in 0..100_000 {
            let now = monotonic_ns();
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn loop_period_is_positive_and_sub_millisecond() {
        let p = loop_period_ns(10_000);
        assert!((1..1_000_000).contains(&p), "period {p}");
    }
}
