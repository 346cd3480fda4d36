//! The engine's throughput on a synthetic but realistic stream (scripts/bench.sh): two CPUs,
//! ticks, IRQs, softirqs and kworker runs with nested IRQs, a stall per group of records, fed
//! in drain-sized batches behind a watermark as a run feeds them; each verdict kept as a run
//! keeps it (ranking and worst stalls), that being part of a stall's cost in the collector.

use std::time::Instant;

use super::run::RunAttribution;
use crate::model::{CulpritClass, Interruption, Stall, Text, ThreadRole, Who, WorkItem};

#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    pub records: u64,
    pub stalls: u64,
    pub seconds: f64,
    pub records_per_second: f64,
    /// The most records and stalls the engine held at once.
    pub peak_retained: usize,
}

pub fn measure(records: u64) -> Throughput {
    // As a run without a metrics file: probes on, no steal clock, the default 200 worst
    // stalls kept (only those stalls get their records copied).
    let mut e = RunAttribution::new(0, vec![1], 200, true, false, 0);
    let text = |s: &str| -> Text { s.into() };
    let kinds = [
        (
            CulpritClass::TimerTick,
            Who::LocalTimer { callbacks: false },
            3_000u64,
        ),
        (CulpritClass::Softirq, Who::Softirq { vector: 1 }, 1_500),
        (
            CulpritClass::Irq,
            Who::Irq {
                number: 36,
                action: text("virtio1-req.0"),
            },
            2_000,
        ),
        (
            CulpritClass::Kworker,
            Who::Work {
                worker: text("kworker/1:1"),
                item: WorkItem::Function(text("vmstat_update")),
            },
            40_000,
        ),
        (
            CulpritClass::Task,
            Who::Task {
                comm: text("java"),
                pid: 4121,
                policy: 0,
                container: None,
            },
            200_000,
        ),
    ];
    // Names are made once, as the decoder interns them.
    let proto: Vec<Interruption> = kinds
        .iter()
        .map(|(class, who, _)| Interruption {
            cpu: 0,
            class: *class,
            start_ns: 0,
            end_ns: 0,
            id: 0,
            who: who.clone(),
            pid: 0,
            parent: None,
            victim: 0,
        })
        .collect();
    let start = Instant::now();
    let mut t: u64 = 1_000_000_000;
    let mut stalls = 0u64;
    let mut peak = 0usize;
    for i in 0..records {
        let k = (i % 7) as usize % kinds.len();
        let cpu = (i % 2) as u32;
        let dur = kinds[k].2;
        let mut r = proto[k].clone();
        r.cpu = cpu;
        r.start_ns = t;
        r.end_ns = t + dur;
        e.interruption(r);
        if i % 4 == 0 {
            e.stall(Stall {
                cpu,
                thread: ThreadRole::Consumer(0),
                start_ns: t.saturating_sub(500),
                end_ns: t + dur + 700,
            });
            stalls += 1;
        }
        t += dur + 5_000;
        if i % 5_000 == 0 {
            e.decide(t.saturating_sub(500_000_000));
            peak = peak.max(e.engine.retained());
        }
    }
    e.finish();
    let seconds = start.elapsed().as_secs_f64();
    Throughput {
        records,
        stalls,
        seconds,
        records_per_second: records as f64 / seconds.max(1e-9),
        peak_retained: peak,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decides_every_stall_it_is_given() {
        let t = super::measure(20_000);
        assert_eq!(t.records, 20_000);
        assert_eq!(t.stalls, 5_000);
        assert!(t.peak_retained > 0);
    }
}
