//! The attribution engine on replayed fixtures (pure, no root): exact nanoseconds and shares.

use jitterscope::attribution::advice::{advice, Machine};
use jitterscope::attribution::{Engine, EngineConfig, Ranking, Verdict};
use jitterscope::model::{
    Cause, CauseKind, CulpritClass as C, Interruption, Spike, Stall, ThreadRole,
};

fn rec(cpu: u32, class: C, start: u64, end: u64, name: &str, detail: &str) -> Interruption {
    Interruption {
        cpu,
        class,
        start_ns: start,
        end_ns: end,
        id: 0,
        name: name.into(),
        detail: detail.into(),
        pid: 0,
        parent: None,
    }
}

fn stall(cpu: u32, start: u64, end: u64) -> Stall {
    Stall {
        cpu,
        thread: ThreadRole::Consumer(0),
        start_ns: start,
        end_ns: end,
    }
}

/// Exact coverage only (no entry/exit credit), so fixtures add up by hand.
fn exact() -> Engine {
    Engine::new(EngineConfig {
        edge_ns: 0,
        ..EngineConfig::default()
    })
}

fn one(engine: &mut Engine, s: Stall) -> Verdict {
    engine.push_stall(s);
    let mut v = engine.finish();
    assert_eq!(v.len(), 1);
    v.remove(0)
}

/// (class, name, ns) of every culprit, in verdict order.
fn parts(v: &Verdict) -> Vec<(C, String, u64)> {
    v.culprits
        .iter()
        .map(|c| (c.class, c.name.clone(), c.ns))
        .collect()
}

#[test]
fn each_class_is_named_with_its_overlap() {
    for (class, name, detail) in [
        (C::Kworker, "kworker/1:1", "vmstat_update"),
        (C::Kthread, "ksoftirqd/1", ""),
        (C::Task, "stress[4121]", "SCHED_OTHER"),
        (C::Irq, "36 virtio1-req.0", ""),
        (C::Softirq, "NET_RX", ""),
        (C::TimerTick, "local timer", ""),
        (C::Ipi, "call-function", ""),
        (C::Nmi, "nmi", ""),
        (C::SelfNoise, "js-probe-drain[7]", "SCHED_OTHER"),
    ] {
        let mut e = exact();
        e.push_interruption(rec(1, class, 1_200, 1_700, name, detail));
        let v = one(&mut e, stall(1, 1_000, 2_000));
        assert_eq!(
            parts(&v),
            [
                (class, name.to_string(), 500),
                (C::Unexplained, "no kernel event".to_string(), 500)
            ],
            "{class}"
        );
        assert_eq!(v.culprits[0].detail, detail);
        assert_eq!(v.explained_share, 0.5);
        assert_eq!(v.culprits[0].share, 0.5);
    }
}

#[test]
fn records_of_other_cpus_do_not_count() {
    let mut e = exact();
    e.push_interruption(rec(0, C::Irq, 1_000, 2_000, "36 x", ""));
    let v = one(&mut e, stall(1, 1_000, 2_000));
    assert_eq!(
        parts(&v),
        [(C::Unexplained, "no kernel event".into(), 1_000)]
    );
    assert_eq!(v.explained_share, 0.0);
    assert_eq!(
        v.culprits[0].detail,
        "hypervisor preemption, SMI or hardware"
    );
}

#[test]
fn an_irq_nested_in_a_kworker_is_counted_once_to_the_irq() {
    let mut e = exact();
    let mut irq = rec(1, C::Irq, 3_000, 4_000, "36 virtio1-req.0", "");
    irq.parent = Some(C::Kworker);
    e.push_interruption(irq);
    e.push_interruption(rec(
        1,
        C::Kworker,
        1_000,
        9_000,
        "kworker/1:1",
        "vmstat_update",
    ));
    let v = one(&mut e, stall(1, 0, 10_000));
    assert_eq!(
        parts(&v),
        [
            (C::Kworker, "kworker/1:1".into(), 7_000),
            (C::Irq, "36 virtio1-req.0".into(), 1_000),
            (C::Unexplained, "no kernel event".into(), 2_000),
        ]
    );
    assert_eq!(v.explained_share, 0.8);
}

#[test]
fn overlapping_causes_go_to_the_deeper_level_then_the_later_start() {
    let mut e = exact();
    // Task level 1000..5000, a softirq 4000..6000 (deeper), a tick 5500..5800 (deeper still).
    e.push_interruption(rec(1, C::Task, 1_000, 5_000, "java[9]", "SCHED_OTHER"));
    e.push_interruption(rec(1, C::Softirq, 4_000, 6_000, "TIMER", ""));
    e.push_interruption(rec(1, C::TimerTick, 5_500, 5_800, "local timer", ""));
    let v = one(&mut e, stall(1, 1_000, 6_000));
    assert_eq!(
        parts(&v),
        [
            (C::Task, "java[9]".into(), 3_000),
            (C::Softirq, "TIMER".into(), 1_700),
            (C::TimerTick, "local timer".into(), 300),
        ]
    );
    assert_eq!(v.explained_share, 1.0);
    // Two task-level records overlapping: the later start wins the overlap.
    let mut e = exact();
    e.push_interruption(rec(1, C::Kthread, 0, 600, "rcu_preempt", ""));
    e.push_interruption(rec(
        1,
        C::Kworker,
        400,
        1_000,
        "kworker/1:0",
        "psi_avgs_work",
    ));
    let v = one(&mut e, stall(1, 0, 1_000));
    assert_eq!(
        parts(&v),
        [
            (C::Kworker, "kworker/1:0".into(), 600),
            (C::Kthread, "rcu_preempt".into(), 400)
        ]
    );
}

#[test]
fn a_stall_spanning_two_causes_splits_between_them() {
    let mut e = exact();
    e.push_interruption(rec(
        3,
        C::Kworker,
        0,
        171_000,
        "kworker/3:1",
        "vmstat_update",
    ));
    e.push_interruption(rec(3, C::TimerTick, 171_000, 174_100, "local timer", ""));
    let v = one(&mut e, stall(3, 0, 182_400));
    assert_eq!(
        parts(&v),
        [
            (C::Kworker, "kworker/3:1".into(), 171_000),
            (C::TimerTick, "local timer".into(), 3_100),
            (C::Unexplained, "no kernel event".into(), 8_300),
        ]
    );
}

#[test]
fn entry_and_exit_paths_next_to_a_record_are_credited_to_it() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 5_000,
        ..EngineConfig::default()
    });
    // 2 µs of interrupt entry before the tick and 3 µs of exit after it go to the tick.
    e.push_interruption(rec(1, C::TimerTick, 12_000, 20_000, "local timer", ""));
    let v = one(&mut e, stall(1, 10_000, 23_000));
    assert_eq!(parts(&v), [(C::TimerTick, "local timer".into(), 13_000)]);
    assert_eq!(v.explained_share, 1.0);
    // A 43 µs piece with no event in it is longer than any entry path: unexplained.
    e.push_interruption(rec(1, C::TimerTick, 112_000, 120_000, "local timer", ""));
    let v = one(&mut e, stall(1, 110_000, 163_000));
    assert_eq!(
        parts(&v),
        [
            (C::TimerTick, "local timer".into(), 10_000),
            (C::Unexplained, "no kernel event".into(), 43_000),
        ]
    );
}

#[test]
fn out_of_order_arrival_within_the_watermark_gives_the_same_verdict() {
    let records = [
        rec(1, C::Kworker, 1_000, 9_000, "kworker/1:1", "vmstat_update"),
        rec(1, C::Irq, 3_000, 4_000, "36 x", ""),
        rec(1, C::TimerTick, 9_500, 9_800, "local timer", ""),
    ];
    let mut a = exact();
    for r in records.iter().cloned() {
        a.push_interruption(r);
    }
    a.push_stall(stall(1, 0, 10_000));
    let in_order = a.advance(20_000);
    let mut b = exact();
    b.push_stall(stall(1, 0, 10_000));
    assert!(
        b.advance(5_000).is_empty(),
        "not decided before the watermark passes it"
    );
    for r in records.iter().rev().cloned() {
        b.push_interruption(r);
    }
    let shuffled = b.advance(20_000);
    assert_eq!(in_order, shuffled);
    assert_eq!(in_order.len(), 1);
}

#[test]
fn lost_records_mark_the_stall_incomplete() {
    let mut e = exact();
    e.mark_lost(1, 5_000, 6_000);
    e.push_stall(stall(1, 0, 4_000));
    e.push_stall(stall(1, 5_500, 7_000));
    let v = e.finish();
    assert!(!v[0].incomplete);
    assert!(v[1].incomplete);
    // A stall with lost records is not claimed to have had "no kernel event".
    assert_eq!(
        parts(&v[0]),
        [(C::Unexplained, "no kernel event".into(), 4_000)]
    );
    assert_eq!(
        parts(&v[1]),
        [(C::Lost, "kernel records lost".into(), 1_500)]
    );
    assert_eq!(v[1].unexplained_ns(), 0);
}

#[test]
fn a_pure_gap_is_all_unexplained() {
    let mut e = Engine::new(EngineConfig::default());
    let v = one(&mut e, stall(1, 0, 50_000));
    assert_eq!(
        parts(&v),
        [(C::Unexplained, "no kernel event".into(), 50_000)]
    );
    assert_eq!(v.unexplained_ns(), 50_000);
}

#[test]
fn a_frequency_change_just_before_the_stall_is_named_without_taking_time() {
    let mut e = exact();
    let mut f = rec(
        1,
        C::FreqChange,
        7_000_000,
        7_000_000,
        "cpu 1",
        "3000000→1200000 kHz",
    );
    f.id = 1_200_000;
    e.push_interruption(f);
    let v = one(&mut e, stall(1, 9_000_000, 9_100_000));
    assert_eq!(v.culprits.len(), 2);
    assert_eq!(v.culprits[0].class, C::FreqChange);
    assert_eq!(
        v.culprits[0].detail,
        "3000000→1200000 kHz, 2.00ms before the stall"
    );
    assert_eq!(v.culprits[0].ns, 0);
    assert_eq!(v.unexplained_ns(), 100_000);
    // Outside the 10 ms look-back it is not blamed.
    let mut e = exact();
    e.push_interruption(rec(1, C::FreqChange, 1_000, 1_000, "cpu 1", "1→2 kHz"));
    let v = one(&mut e, stall(1, 20_000_000, 20_100_000));
    assert!(v.culprits.iter().all(|c| c.class != C::FreqChange));
}

#[test]
fn a_kworker_says_who_queued_its_work() {
    let mut e = exact();
    e.push_cause(Cause {
        target_cpu: 1,
        at_ns: 900,
        kind: CauseKind::QueueWork,
        sender_cpu: 0,
        sender_comm: "bash".into(),
        sender_pid: 77,
        what: "refresh_vm_stats".into(),
        callsite: String::new(),
    });
    e.push_interruption(rec(
        1,
        C::Kworker,
        1_000,
        2_000,
        "kworker/1:1",
        "refresh_vm_stats",
    ));
    let v = one(&mut e, stall(1, 1_000, 2_000));
    assert_eq!(v.culprits[0].via, "queued by bash[77] on CPU 0");
}

#[test]
fn memory_stays_bounded_however_long_the_run() {
    let mut e = Engine::new(EngineConfig::default());
    let mut decided = 0;
    let mut peak = 0;
    for i in 0..2_000_000u64 {
        let t = i * 10_000; // a record every 10 µs: 20 s of a busy CPU
        e.push_interruption(rec(1, C::TimerTick, t, t + 2_000, "local timer", ""));
        if i % 100 == 0 {
            e.push_stall(stall(1, t, t + 5_000));
        }
        if i % 10_000 == 0 {
            decided += e.advance(t.saturating_sub(500_000_000)).len();
            peak = peak.max(e.retained());
        }
    }
    decided += e.finish().len();
    assert_eq!(decided, 20_000);
    // 1 s of retention plus the 0.5 s lag at 100 k records/s, and the pending stalls.
    assert!(peak < 200_000, "retained {peak} records");
}

fn ranking_fixture() -> Ranking {
    let mut e = exact();
    e.push_interruption(rec(1, C::Kworker, 0, 800, "kworker/1:1", "vmstat_update"));
    e.push_interruption(rec(
        1,
        C::Kworker,
        10_000,
        10_300,
        "kworker/1:1",
        "vmstat_update",
    ));
    e.push_interruption(rec(1, C::Irq, 20_000, 20_500, "36 virtio1-req.0", ""));
    for s in [
        stall(1, 0, 1_000),
        stall(1, 10_000, 10_500),
        stall(1, 20_000, 20_500),
    ] {
        e.push_stall(s);
    }
    let mut r = Ranking::default();
    for v in e.finish() {
        r.add(&v);
    }
    r
}

fn machine(online: &[u32], measured: &[u32]) -> Machine {
    Machine {
        online: online.to_vec(),
        measured: measured.to_vec(),
        virtual_machine: true,
    }
}

#[test]
fn the_ranking_aggregates_by_culprit_with_shares_of_all_stall_time() {
    let ranked = ranking_fixture().ranked(&machine(&[0, 1, 2, 3], &[1, 3]));
    let rows: Vec<(C, &str, u64, u64, u64)> = ranked
        .iter()
        .map(|c| (c.class, c.name.as_str(), c.count, c.total_ns, c.max_ns))
        .collect();
    assert_eq!(
        rows,
        [
            (C::Kworker, "kworker/1:1", 2, 1_100, 800),
            (C::Irq, "36 virtio1-req.0", 1, 500, 500),
            (C::Unexplained, "no kernel event", 2, 400, 200),
        ]
    );
    assert_eq!(ranked[0].share, 0.55);
    assert_eq!(ranked[0].cpus, [(1, 1_100)]);
}

#[test]
fn advice_carries_the_command_for_this_machine() {
    let m = machine(&[0, 1, 2, 3], &[1, 3]);
    let a = advice(C::Irq, "36 virtio1-req.0", "", &[(3, 1)], &m);
    assert!(
        a.contains("echo 0,2 > /proc/irq/36/smp_affinity_list"),
        "{a}"
    );
    let a = advice(C::Kworker, "kworker/3:1", "vmstat_update", &[(3, 1)], &m);
    assert!(a.contains("sysctl vm.stat_interval"), "{a}");
    assert!(
        a.contains("echo 5 > /sys/devices/virtual/workqueue/cpumask"),
        "{a}"
    );
    let a = advice(C::TimerTick, "local timer", "", &[(3, 1)], &m);
    assert!(a.contains("nohz_full=1,3"), "{a}");
    let a = advice(C::Task, "java[9]", "SCHED_OTHER", &[(3, 1)], &m);
    assert!(a.contains("cset shield --cpu 1,3"), "{a}");
    let a = advice(C::FreqChange, "cpu 3", "3000000→1200000 kHz", &[(3, 1)], &m);
    assert!(a.contains("frequency-set -g performance"), "{a}");
    let a = advice(C::Unexplained, "no kernel event", "", &[(3, 1)], &m);
    assert!(a.contains("dedicated"), "{a}");
    // Every CPU measured: say it cannot be moved off all of them.
    let all = machine(&[0, 1], &[0, 1]);
    let a = advice(C::Irq, "36 x", "", &[(1, 1)], &all);
    assert!(a.contains("cannot be moved off all of them"), "{a}");
}

#[test]
fn a_reschedule_ipi_that_wakes_a_kworker_counts_to_the_kworker() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 1_000,
        ..EngineConfig::default()
    });
    e.push_interruption(rec(1, C::Ipi, 1_000, 4_000, "reschedule", ""));
    e.push_interruption(rec(
        1,
        C::Kworker,
        4_500,
        9_000,
        "kworker/1:2",
        "refresh_vm_stats",
    ));
    // A later, unrelated IPI stays an IPI.
    e.push_interruption(rec(1, C::Ipi, 15_000, 16_000, "reschedule", ""));
    let v = one(&mut e, stall(1, 1_000, 16_000));
    assert_eq!(
        parts(&v),
        [
            (C::Kworker, "kworker/1:2".into(), 8_000),
            (C::Ipi, "reschedule".into(), 1_000),
            (C::Unexplained, "no kernel event".into(), 6_000),
        ]
    );
    assert!(v.culprits[0].via.contains("woken by a reschedule IPI"));
}

#[test]
fn a_message_spike_is_explained_by_the_stalls_of_both_cpus_in_its_window() {
    let mut e = exact();
    // Producer CPU 0: stalled 100..300 by an IRQ; consumer CPU 3: stalled 250..1_250, a
    // kworker 250..1_050 then nothing. The message was published at 200, received at 1_250.
    e.push_interruption(rec(0, C::Irq, 100, 300, "36 virtio1-req.0", ""));
    e.push_interruption(rec(
        3,
        C::Kworker,
        250,
        1_050,
        "kworker/3:1",
        "vmstat_update",
    ));
    e.push_stall(stall(0, 100, 300));
    e.push_stall(stall(3, 250, 1_250));
    // A stall outside the window does not count.
    e.push_stall(stall(3, 5_000, 6_000));
    e.push_spike(
        Spike {
            consumer: 0,
            publish_ns: 200,
            receive_ns: 1_250,
        },
        0,
        3,
    );
    e.finish();
    let spikes = e.take_spikes();
    assert_eq!(spikes.len(), 1);
    let v = &spikes[0];
    assert_eq!((v.producer_stalled_ns, v.consumer_stalled_ns), (100, 1_000));
    let got: Vec<(C, u64)> = v.culprits.iter().map(|c| (c.class, c.ns)).collect();
    // The IRQ's stall lies half inside the window: half its 200 ns. The kworker's stall
    // lies wholly inside: its 800 ns, and the stall's 200 ns unexplained.
    assert_eq!(
        got,
        [(C::Kworker, 800), (C::Irq, 100), (C::Unexplained, 200)]
    );
    assert!((v.culprits[0].share - 800.0 / 1_050.0).abs() < 1e-9);
    assert!(e.take_spikes().is_empty(), "handed over once");
}
