//! The physical floor of one cross-core transfer: two threads pinned to two CPUs bounce a
//! cache line back and forth; half a round trip is what one message hop cannot beat.
//! The workload's transit latency is judged against it (scripts/bench.sh); `jitterscope
//! floor` measures it here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use hdrhistogram::Histogram;

use super::histograms::new_histogram;
use super::spsc::CachePadded;
use crate::model::Cpu;
use crate::platform::affinity::pin_current_thread;
use crate::platform::clock::monotonic_ns;
use crate::summary::Summary;

/// What `jitterscope floor` measures: between which two CPUs, how many round trips.
#[derive(Debug, Clone, Copy)]
pub struct FloorConfig {
    /// The side that times the round trips.
    pub timing_cpu: Cpu,
    /// The side that answers.
    pub echo_cpu: Cpu,
    pub rounds: u64,
}

/// `jitterscope floor`'s measurement: the figures of the one-way floor.
pub fn floor(cfg: &FloorConfig) -> anyhow::Result<Summary> {
    let (a, b) = (cfg.timing_cpu, cfg.echo_cpu);
    let h = measure(a, b, cfg.rounds)
        .with_context(|| format!("cannot run the ping-pong between CPUs {a} and {b}"))?;
    Ok(Summary::of(&h))
}

/// Measures `rounds` round trips between `a` (timing side) and `b`; returns the histogram
/// of one-way times (round trip / 2) in ns.
pub fn measure(a: Cpu, b: Cpu, rounds: u64) -> std::io::Result<Histogram<u64>> {
    let line = Arc::new(CachePadded(AtomicU64::new(0)));
    let failed = Arc::new(AtomicBool::new(false));
    let (l2, f2) = (line.clone(), failed.clone());
    let echo = std::thread::Builder::new()
        .name(format!("js-pong-{b}"))
        .spawn(move || -> std::io::Result<()> {
            if let Err(e) = pin_current_thread(b) {
                f2.store(true, Ordering::Relaxed);
                return Err(e);
            }
            // Answer every odd value with the next even one until told to stop (u64::MAX).
            let mut expect = 1;
            loop {
                let v = l2.load(Ordering::Acquire);
                if v == u64::MAX {
                    return Ok(());
                }
                if v == expect {
                    l2.store(v + 1, Ordering::Release);
                    expect += 2;
                }
                std::hint::spin_loop();
            }
        })?;
    let result = (|| {
        pin_current_thread(a)?;
        let mut h = new_histogram();
        let warmup = rounds / 10 + 1000;
        let mut v = 0u64;
        for i in 0..warmup + rounds {
            if failed.load(Ordering::Relaxed) {
                break;
            }
            let t0 = monotonic_ns();
            line.store(v + 1, Ordering::Release);
            while line.load(Ordering::Acquire) != v + 2 {
                std::hint::spin_loop();
            }
            let t1 = monotonic_ns();
            v += 2;
            if i >= warmup {
                h.saturating_record(((t1 - t0) / 2).max(1));
            }
        }
        Ok(h)
    })();
    line.store(u64::MAX, Ordering::Release);
    let echoed = echo
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the echo thread panicked")));
    echoed?;
    result
}
