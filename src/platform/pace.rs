//! Work in short slices. When jitterscope's own threads must share a measured CPU (every CPU
//! is measured), each stretch they run is a stall of the thread measured there: the collector
//! does its work in pieces and, once a slice is used up, sleeps so the measured thread runs
//! again before it goes on.

use std::time::Duration;

use super::clock::monotonic_ns;

/// Longest stretch of work before a pause (the slice seen as `self` stays below ~100 µs with
/// the switches around it).
pub const SLICE_NS: u64 = 60_000;
/// How long a pause lets the measured thread run (plus the timer slack of the sleep).
pub const PAUSE: Duration = Duration::from_micros(50);

/// Tracks the slice under way; a disabled pacer never pauses.
#[derive(Debug, Clone)]
pub struct Pacer {
    enabled: bool,
    slice_ns: u64,
    pause: Duration,
    began_ns: u64,
    pub cpu0: u64,
    pub last_cpu: u64,
    pub last_at: &'static std::panic::Location<'static>,
    /// Pauses taken so far.
    pub pauses: u64,
}

impl Pacer {
    #[track_caller]
    pub fn new(enabled: bool) -> Pacer {
        Pacer::with(enabled, SLICE_NS, PAUSE)
    }

    #[track_caller]
    pub fn with(enabled: bool, slice_ns: u64, pause: Duration) -> Pacer {
        Pacer {
            enabled,
            slice_ns,
            pause,
            began_ns: monotonic_ns(),
            cpu0: tcpu(),
            last_cpu: tcpu(),
            last_at: std::panic::Location::caller(),
            pauses: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A slice begins (the thread just woke up).
    #[track_caller]
    pub fn begin(&mut self) {
        if self.enabled {
            self.last_cpu = tcpu();
            self.last_at = std::panic::Location::caller();
            self.began_ns = monotonic_ns();
            self.cpu0 = tcpu();
        }
    }

    /// Between two pieces of work: pauses if the slice is used up. True if it paused.
    #[track_caller]
    pub fn between(&mut self) -> bool {
        if self.enabled {
            let here = std::panic::Location::caller();
            let now = tcpu();
            let d = now - self.last_cpu;
            if d > 100_000 {
                eprintln!("PIECE {} µs {} -> {}", d / 1000, self.last_at, here);
            }
            self.last_cpu = if d > 100_000 { tcpu() } else { now };
            self.last_at = here;
        }
        if !self.enabled || monotonic_ns().saturating_sub(self.began_ns) < self.slice_ns {
            return false;
        }
        self.cpu0 = sect(8, self.cpu0);
        std::thread::sleep(self.pause);
        self.pauses += 1;
        self.began_ns = monotonic_ns();
        self.cpu0 = tcpu();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_pacer_never_pauses() {
        let mut p = Pacer::with(false, 0, Duration::from_millis(50));
        p.begin();
        assert!(!p.between());
        assert_eq!(p.pauses, 0);
    }

    #[test]
    fn pauses_once_the_slice_is_used_up_and_starts_a_new_one() {
        let mut p = Pacer::with(true, 200_000, Duration::from_micros(10));
        p.begin();
        assert!(!p.between(), "a fresh slice has time left");
        std::thread::sleep(Duration::from_micros(300));
        assert!(p.between(), "300 µs of a 200 µs slice: pause");
        assert_eq!(p.pauses, 1);
    }
}

// TEMP instrumentation
pub static SECT: [std::sync::atomic::AtomicU64; 10] = [const { std::sync::atomic::AtomicU64::new(0) }; 10];
pub fn tcpu() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
pub fn sect(i: usize, t0: u64) -> u64 {
    let now = tcpu();
    SECT[i].fetch_max(now - t0, std::sync::atomic::Ordering::Relaxed);
    now
}
pub fn sect_dump() {
    let v: Vec<u64> = SECT.iter().map(|a| a.load(std::sync::atomic::Ordering::Relaxed) / 1000).collect();
    eprintln!("SECT µs {v:?}");
}
