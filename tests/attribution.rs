//! The attribution engine on replayed fixtures (pure, no root): exact nanoseconds and shares.

use jitterscope::attribution::Share;
use jitterscope::attribution::{CpuTheft, Engine, EngineConfig, Ranking, Verdict};
use jitterscope::model::{
    vector, Cause, CauseKind, Culprit, CulpritClass as C, FaultKind, Interruption, SentFrom, Spike,
    Stall, StealSample, ThreadRole, Who, WorkItem,
};
use jitterscope::report::advice::{advice, Machine, Tracer};
use jitterscope::report::culprit;

/// A fixture's culprit, written as the report names it (`comm[pid]`, `36 virtio1-req.0`,
/// `cpu 1` going `1→2 kHz` …), built as the typed value the probes would give.
fn who(class: C, name: &str, detail: &str) -> Who {
    let task = || match name.rsplit_once('[') {
        Some((comm, pid)) => Who::Task {
            comm: comm.into(),
            pid: pid.trim_end_matches(']').parse().unwrap(),
            policy: 0,
            container: None,
        },
        None => Who::Task {
            comm: name.into(),
            pid: 0,
            policy: 0,
            container: None,
        },
    };
    match class {
        C::Task | C::SelfNoise => task(),
        C::Kworker => Who::Work {
            worker: name.into(),
            item: WorkItem::Function(detail.into()),
        },
        C::Kthread => Who::Kthread { comm: name.into() },
        C::Irq => {
            let (number, action) = name.split_once(' ').unwrap();
            Who::Irq {
                number: number.parse().unwrap(),
                action: action.into(),
            }
        }
        C::Softirq => Who::Softirq {
            vector: (0..10)
                .find(|&v| jitterscope::model::softirq_name(v) == name)
                .unwrap(),
        },
        C::TimerTick | C::Ipi => Who::Vector {
            vector: (1..10)
                .find(|&v| jitterscope::model::vector_name(v) == name)
                .unwrap(),
        },
        C::Nmi => Who::Nmi {
            handler: detail.into(),
        },
        C::FreqChange => {
            let (old, new) = detail.trim_end_matches(" kHz").split_once('→').unwrap();
            Who::Freq {
                cpu: name.trim_start_matches("cpu ").parse().unwrap(),
                old_khz: old.parse().unwrap_or(0),
                new_khz: new.parse().unwrap(),
                before_ns: 0,
            }
        }
        C::Fault => Who::Fault {
            kind: FaultKind::Minor,
        },
        C::Throttled => Who::Throttled {
            policy: if detail.contains("SCHED_FIFO") { 1 } else { 0 },
        },
        C::Hypervisor => Who::Host { cpu: 0 },
        C::Unexplained => Who::Unexplained { steal_clock: true },
        C::Lost => Who::Lost,
    }
}

fn culprit_of(class: C, name: &str, detail: &str) -> Culprit {
    Culprit {
        class,
        who: who(class, name, detail),
    }
}

/// A culprit's name, detail and `via` as the report shows them.
trait Words {
    fn culprit(&self) -> &Culprit;

    fn name(&self) -> String {
        culprit::name(&self.culprit().who)
    }

    fn detail(&self) -> String {
        culprit::detail(&self.culprit().who)
    }
}

impl Words for Share {
    fn culprit(&self) -> &Culprit {
        &self.culprit
    }
}

impl Words for jitterscope::attribution::RankedCulprit {
    fn culprit(&self) -> &Culprit {
        &self.culprit
    }
}

fn via(c: &Share) -> String {
    culprit::via(c.via.as_deref())
}

fn rec(cpu: u32, class: C, start: u64, end: u64, name: &str, detail: &str) -> Interruption {
    Interruption {
        cpu,
        class,
        start_ns: start,
        end_ns: end,
        id: 0,
        who: who(class, name, detail),
        pid: 0,
        parent: None,
        victim: 0,
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

fn producer_stall(cpu: u32, start: u64, end: u64) -> Stall {
    Stall {
        thread: ThreadRole::Producer,
        ..stall(cpu, start, end)
    }
}

fn steal(cpu: u32, from_ns: u64, to_ns: u64, steal_ns: u64) -> StealSample {
    StealSample {
        cpu,
        from_ns,
        to_ns,
        steal_ns,
        victim: 0,
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

/// (class, name, measured and inferred ns) of every culprit, in verdict order.
fn parts(v: &Verdict) -> Vec<(C, String, u64)> {
    v.culprits
        .iter()
        .map(|c| (c.class(), c.name().to_string(), c.ns()))
        .collect()
}

/// (class, measured ns, inferred ns) of every culprit, in order.
fn split(list: &[jitterscope::attribution::Share]) -> Vec<(C, u64, u64)> {
    list.iter()
        .map(|c| (c.class(), c.measured_ns, c.inferred_ns))
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
        (
            C::Throttled,
            "scheduler",
            "RT throttling (sched_rt_runtime_us) of a SCHED_FIFO thread",
        ),
        (
            C::Throttled,
            "scheduler",
            "a cgroup CPU quota (cpu.max) of a SCHED_OTHER thread",
        ),
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
        assert_eq!(&*v.culprits[0].detail(), detail);
        assert_eq!(v.explained_share, 0.5);
        assert_eq!(v.culprits[0].share, 0.5);
    }
}

#[test]
fn the_idle_stretches_of_a_throttling_window_are_the_schedulers_not_unexplained() {
    // A SCHED_FIFO consumer held off for 50 ms: the CPU idles 10 ms (throttled), a task runs
    // 20 ms, the CPU idles again until 49.9 ms with an IRQ inside the idle stretch.
    let fifo = "RT throttling (sched_rt_runtime_us) of a SCHED_FIFO thread";
    let mut e = exact();
    e.push_interruption(rec(1, C::Throttled, 0, 10_000_000, "scheduler", fifo));
    e.push_interruption(rec(
        1,
        C::Task,
        10_000_000,
        30_000_000,
        "stress[7]",
        "SCHED_OTHER",
    ));
    let irq = rec(1, C::Irq, 35_000_000, 35_010_000, "36 virtio1-req.0", "");
    e.push_interruption(irq);
    e.push_interruption(rec(
        1,
        C::Throttled,
        30_000_000,
        49_900_000,
        "scheduler",
        fifo,
    ));
    let v = one(&mut e, stall(1, 0, 50_000_000));
    assert_eq!(
        parts(&v),
        [
            (C::Throttled, "scheduler".to_string(), 29_890_000),
            (C::Task, "stress[7]".to_string(), 20_000_000),
            (C::Irq, "36 virtio1-req.0".to_string(), 10_000),
            (C::Unexplained, "no kernel event".to_string(), 100_000),
        ]
    );
    assert_eq!(v.culprits[0].episodes, 2);
    assert_eq!(&*v.culprits[0].detail(), fifo);
    assert_eq!(C::Throttled.info().how, "measured");
}

#[test]
fn a_watched_threads_own_throttling_is_its_wait_not_its_own_run() {
    // A watched SCHED_FIFO thread (tid 7) preempted at 0 and run again at 50 ms: the probes'
    // throttled record carries its pid, as its own runs do, yet it is what held it off.
    let fifo = "RT throttling (sched_rt_runtime_us) of a SCHED_FIFO thread";
    let mut e = exact();
    let mut held = rec(1, C::Throttled, 0, 40_000_000, "scheduler", fifo);
    held.pid = 7;
    e.push_interruption(held);
    let mut own = rec(1, C::Task, 50_000_000, 60_000_000, "spin[7]", "SCHED_FIFO");
    own.pid = 7;
    e.push_interruption(own);
    let wait = Stall {
        thread: ThreadRole::Watched(7),
        ..stall(1, 0, 50_000_000)
    };
    let v = one(&mut e, wait);
    assert_eq!(
        parts(&v),
        [
            (C::Throttled, "scheduler".to_string(), 40_000_000),
            (C::Unexplained, "no kernel event".to_string(), 10_000_000),
        ]
    );
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
    // No steal clock was seen: the remainder cannot be told apart from host preemption.
    assert_eq!(
        &*v.culprits[0].detail(),
        culprit::UNEXPLAINED_DETAIL_NO_STEAL
    );
    e.set_steal_clock(true);
    let v = one(&mut e, stall(1, 3_000, 4_000));
    assert_eq!(&*v.culprits[0].detail(), culprit::UNEXPLAINED_DETAIL);
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
fn entry_and_exit_paths_next_to_a_record_are_inferred_apart_from_its_measured_time() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 5_000,
        ..EngineConfig::default()
    });
    // 2 µs of interrupt entry before the tick and 3 µs of exit after it are inferred to be
    // the tick's: its own row, never in its measured 8 µs.
    e.push_interruption(rec(1, C::TimerTick, 12_000, 20_000, "local timer", ""));
    let v = one(&mut e, stall(1, 10_000, 23_000));
    assert_eq!(split(&v.culprits), [(C::TimerTick, 8_000, 5_000)]);
    assert_eq!(v.culprits[0].episodes, 1);
    assert_eq!(v.explained_share, 1.0);
    // A 43 µs piece with no event in it is longer than any entry path: unexplained.
    e.push_interruption(rec(1, C::TimerTick, 112_000, 120_000, "local timer", ""));
    let v = one(&mut e, stall(1, 110_000, 163_000));
    assert_eq!(
        split(&v.culprits),
        [(C::TimerTick, 8_000, 2_000), (C::Unexplained, 43_000, 0)]
    );
}

#[test]
fn a_task_level_record_nested_in_an_interrupt_takes_its_time_from_it() {
    let mut e = exact();
    // The timer interrupt 0..10_000 ran jitterscope's own sleeper's hrtimer 2_000..6_000.
    e.push_interruption(rec(1, C::TimerTick, 0, 10_000, "local timer", ""));
    let mut own = rec(
        1,
        C::SelfNoise,
        2_000,
        6_000,
        "local timer",
        "hrtimer_wakeup of js-collector",
    );
    own.parent = Some(C::TimerTick);
    e.push_interruption(own);
    let v = one(&mut e, stall(1, 0, 10_000));
    assert_eq!(
        split(&v.culprits),
        [(C::TimerTick, 6_000, 0), (C::SelfNoise, 4_000, 0)]
    );
}

#[test]
fn the_inference_boundary_is_exact() {
    for (gap, inferred) in [(5_000, true), (5_001, false)] {
        let mut e = Engine::new(EngineConfig {
            edge_ns: 5_000,
            ..EngineConfig::default()
        });
        e.push_interruption(rec(1, C::Irq, 10_000 + gap, 20_000, "36 x", ""));
        let v = one(&mut e, stall(1, 10_000, 20_000));
        let want = if inferred {
            vec![(C::Irq, 10_000 - gap, gap)]
        } else {
            vec![(C::Irq, 10_000 - gap, 0), (C::Unexplained, gap, 0)]
        };
        assert_eq!(split(&v.culprits), want, "gap {gap}");
    }
}

#[test]
fn a_gap_between_two_records_is_inferred_only_when_short() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 1_000,
        ..EngineConfig::default()
    });
    // Tick 0..2_000, 500 ns gap, IRQ 2_500..4_000, 30 µs gap, IRQ 34_000..35_000.
    e.push_interruption(rec(1, C::TimerTick, 0, 2_000, "local timer", ""));
    e.push_interruption(rec(1, C::Irq, 2_500, 4_000, "36 x", ""));
    e.push_interruption(rec(1, C::Irq, 34_000, 35_000, "36 x", ""));
    let v = one(&mut e, stall(1, 0, 35_000));
    // The short gap goes to the record it follows (its exit path); the long one to nobody.
    assert_eq!(
        split(&v.culprits),
        [
            (C::Irq, 2_500, 0),
            (C::TimerTick, 2_000, 500),
            (C::Unexplained, 30_000, 0)
        ]
    );
    assert_eq!(v.culprits[0].episodes, 2);
    assert_eq!(v.culprits[0].longest_ns, 1_500);
}

#[test]
fn a_kworker_run_with_several_items_gives_each_item_its_time() {
    let mut e = exact();
    // The worker's run 0..10_000 (named after its first item) holds two items; a later
    // continuation slice of the second item (switched out and back in) is its own record.
    e.push_interruption(rec(
        1,
        C::Kworker,
        0,
        10_000,
        "kworker/1:1",
        "vmstat_update",
    ));
    e.push_interruption(rec(
        1,
        C::Kworker,
        1_000,
        4_000,
        "kworker/1:1",
        "vmstat_update",
    ));
    e.push_interruption(rec(
        1,
        C::Kworker,
        5_000,
        9_000,
        "kworker/1:1",
        "refresh_vm_stats",
    ));
    e.push_interruption(rec(
        1,
        C::Kworker,
        20_000,
        26_000,
        "kworker/1:1",
        "refresh_vm_stats",
    ));
    e.push_interruption(rec(
        1,
        C::Kworker,
        20_000,
        25_000,
        "kworker/1:1",
        "refresh_vm_stats",
    ));
    let v = one(&mut e, stall(1, 0, 30_000));
    let details: Vec<String> = v.culprits.iter().map(|c| c.detail()).collect();
    let got: Vec<(C, &str, u64, u32)> = v
        .culprits
        .iter()
        .zip(&details)
        .map(|(c, d)| (c.class(), d.as_str(), c.ns(), c.episodes))
        .collect();
    assert_eq!(
        got[..2],
        [
            // 4 µs, the continuation's 5 µs, and its run record's 1 µs after it: the inner
            // record of two equal starts is the item.
            (C::Kworker, "refresh_vm_stats", 10_000, 3),
            // Its item's 3 µs and the run's 3 µs of overhead around the items.
            (C::Kworker, "vmstat_update", 6_000, 2),
        ]
    );
    assert_eq!((got[2].0, got[2].2, got[2].3), (C::Unexplained, 14_000, 2));
}

#[test]
fn steal_growth_splits_a_gap_into_hypervisor_inferred_and_unexplained() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 2_000,
        ..EngineConfig::default()
    });
    // A 100 µs gap before a tick; the steal clock grew 60 µs between the previous probe read
    // (at 0) and the tick (at 100_000): the host held the vCPU 60 µs of the gap.
    e.push_interruption(rec(1, C::TimerTick, 100_000, 110_000, "local timer", ""));
    e.push_steal(steal(1, 0, 100_000, 60_000));
    let v = one(&mut e, stall(1, 0, 110_000));
    assert_eq!(
        split(&v.culprits),
        [
            (C::TimerTick, 10_000, 0),
            (C::Hypervisor, 60_000, 0),
            (C::Unexplained, 40_000, 0)
        ]
    );
    assert_eq!(v.hypervisor, [(0, 60_000)]);
    // Steal that covers all but 1.5 µs of the gap leaves an entry path to infer.
    let mut e = Engine::new(EngineConfig {
        edge_ns: 2_000,
        ..EngineConfig::default()
    });
    e.push_interruption(rec(1, C::TimerTick, 100_000, 110_000, "local timer", ""));
    e.push_steal(steal(1, 0, 100_000, 98_500));
    let v = one(&mut e, stall(1, 0, 110_000));
    assert_eq!(
        split(&v.culprits),
        [(C::TimerTick, 10_000, 1_500), (C::Hypervisor, 98_500, 0)]
    );
    assert!(v.culprits[1].detail().contains("steal"));
}

#[test]
fn steal_inside_a_stall_that_a_task_ran_through_is_the_hypervisors() {
    // The collector ran 850 µs of a stall; the steal clock grew 700 µs between two reads
    // inside it (its switch-in at 10 µs and a tick at 500 µs; then 50 µs to the switch-out):
    // the host held the vCPU, whichever task was current. The tick keeps its time.
    let mut e = exact();
    e.push_interruption(rec(0, C::SelfNoise, 10_000, 860_000, "js-collector", ""));
    e.push_interruption(rec(0, C::TimerTick, 500_000, 505_000, "local timer", ""));
    e.push_steal(steal(0, 10_000, 500_000, 400_000));
    e.push_steal(steal(0, 505_000, 860_000, 300_000));
    let v = one(&mut e, producer_stall(0, 0, 870_000));
    assert_eq!(
        split(&v.culprits),
        [
            (C::SelfNoise, 145_000, 0),
            (C::TimerTick, 5_000, 0),
            (C::Hypervisor, 700_000, 0),
            (C::Unexplained, 20_000, 0),
        ]
    );
    assert_eq!(v.culprits[0].longest_ns, 145_000);
    // Where it lay is said: perf, seeing the guest's clock, counts the run whole.
    let host: Vec<_> = v.culprits.iter().map(|c| c.host_ns).collect();
    assert_eq!(host, [700_000, 0, 0, 0]);
    // Earliest first inside each window, net of the run's time.
    assert_eq!(v.hypervisor, [(10_000, 410_000), (505_000, 805_000)]);

    // Uncovered time inside the window takes the steal first; a task takes only the rest.
    let mut e = exact();
    e.push_interruption(rec(0, C::Task, 100_000, 200_000, "bash[7]", ""));
    e.push_steal(steal(0, 0, 200_000, 150_000));
    let v = one(&mut e, producer_stall(0, 0, 200_000));
    assert_eq!(
        split(&v.culprits),
        [(C::Task, 50_000, 0), (C::Hypervisor, 150_000, 0)]
    );
    assert_eq!(v.culprits[0].host_ns, 50_000);

    // A run the host held whole is still named, with no time of its own.
    let mut e = exact();
    e.push_interruption(rec(0, C::Task, 100_000, 200_000, "bash[7]", ""));
    e.push_steal(steal(0, 0, 200_000, 200_000));
    let v = one(&mut e, producer_stall(0, 0, 200_000));
    assert_eq!(
        split(&v.culprits),
        [(C::Task, 0, 0), (C::Hypervisor, 200_000, 0)]
    );
    assert_eq!(v.culprits[0].host_ns, 100_000);

    // A window reaching outside the stall may hold its growth outside it: only the stall's
    // uncovered time takes any, as before, and the task keeps its run.
    let mut e = exact();
    e.push_interruption(rec(0, C::Task, 100_000, 200_000, "bash[7]", ""));
    e.push_steal(steal(0, 50_000, 300_000, 150_000));
    let v = one(&mut e, producer_stall(0, 80_000, 200_000));
    assert_eq!(
        split(&v.culprits),
        [(C::Task, 100_000, 0), (C::Hypervisor, 20_000, 0)]
    );
    assert_eq!(v.culprits[0].host_ns, 0);
}

#[test]
fn a_steal_window_is_given_once_across_stalls() {
    let mut e = exact();
    // One window of 30 µs growth covers two uncovered stalls of 20 µs each.
    e.push_steal(steal(1, 0, 100_000, 30_000));
    e.push_stall(stall(1, 10_000, 30_000));
    e.push_stall(stall(1, 50_000, 70_000));
    let v = e.finish();
    assert_eq!(split(&v[0].culprits), [(C::Hypervisor, 20_000, 0)]);
    assert_eq!(
        split(&v[1].culprits),
        [(C::Hypervisor, 10_000, 0), (C::Unexplained, 10_000, 0)]
    );
    // Without a steal clock the remainder says so.
    let mut e = exact();
    let v = one(&mut e, stall(1, 0, 1_000));
    assert!(
        v.culprits[0].detail().contains("no steal clock"),
        "{}",
        v.culprits[0].detail()
    );
}

#[test]
fn an_ipi_jitterscope_sent_itself_is_its_own_noise() {
    let mut e = exact();
    // The collector freed memory: a TLB shootdown to the consumer's CPU.
    e.push_cause(Cause {
        target_cpu: 1,
        at_ns: 900,
        kind: CauseKind::Ipi,
        sender_cpu: 0,
        sender_comm: "js-collector".into(),
        sender_pid: 42,
        sender_is_self: true,
        sent_from: SentFrom::Task,
        what: "flush_tlb_func".into(),
        callsite: String::new(),
    });
    let call = Interruption {
        id: vector::CALL_FUNCTION,
        ..rec(1, C::Ipi, 1_000, 3_000, "call-function", "")
    };
    e.push_interruption(call.clone());
    let v = one(&mut e, stall(1, 1_000, 3_000));
    let c = &v.culprits[0];
    assert_eq!(
        (c.class(), &*c.name(), &*c.detail(), c.ns()),
        (
            C::SelfNoise,
            "call-function IPI",
            "TLB shootdown from js-collector",
            2_000
        )
    );
    assert!(via(c).contains("js-collector[42]"), "{}", via(c));
}

#[test]
fn an_ipi_names_its_sender_only_for_a_send_of_its_vector() {
    let mut e = exact();
    let send = |at: u64, what: &str| Cause {
        target_cpu: 1,
        at_ns: at,
        kind: CauseKind::Ipi,
        sender_cpu: 0,
        sender_comm: "js-collector".into(),
        sender_pid: 42,
        sender_is_self: false,
        sent_from: SentFrom::Task,
        what: what.into(),
        callsite: String::new(),
    };
    // A call-function send (with a callback) just before a reschedule IPI is not its sender.
    e.push_cause(send(900, "flush_tlb_func"));
    let mut resched = rec(1, C::Ipi, 1_000, 2_000, "reschedule", "");
    resched.id = vector::RESCHEDULE;
    e.push_interruption(resched);
    let mut call = rec(1, C::Ipi, 3_000, 4_000, "call-function", "");
    call.id = vector::CALL_FUNCTION;
    e.push_interruption(call);
    let v = one(&mut e, stall(1, 1_000, 4_000));
    let words: Vec<(String, String)> = v
        .culprits
        .iter()
        .filter(|c| c.class() == C::Ipi)
        .map(|c| (c.name(), via(c)))
        .collect();
    let via: Vec<(&str, &str)> = words
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        via,
        [
            ("reschedule", ""),
            (
                "call-function",
                "sent by js-collector[42] on CPU 0 (flush_tlb_func)"
            )
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
    assert_eq!(v.culprits[0].class(), C::FreqChange);
    assert_eq!(
        &*v.culprits[0].detail(),
        "3000000→1200000 kHz, 2.00ms before the stall"
    );
    assert_eq!(v.culprits[0].ns(), 0);
    assert_eq!(v.unexplained_ns(), 100_000);
    // Outside the 10 ms look-back it is not blamed.
    let mut e = exact();
    e.push_interruption(rec(1, C::FreqChange, 1_000, 1_000, "cpu 1", "1→2 kHz"));
    let v = one(&mut e, stall(1, 20_000_000, 20_100_000));
    assert!(v.culprits.iter().all(|c| c.class() != C::FreqChange));
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
        sender_is_self: false,
        sent_from: SentFrom::Task,
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
    assert_eq!(via(&v.culprits[0]), "queued by bash[77] on CPU 0");
}

#[test]
fn delayed_work_queued_from_the_timer_softirq_is_not_credited_to_the_task_it_interrupted() {
    let mut e = exact();
    // gc_worker's timer expired in the TIMER softirq on CPU 1 while the consumer was current.
    e.push_cause(Cause {
        target_cpu: 1,
        at_ns: 900,
        kind: CauseKind::QueueWork,
        sender_cpu: 1,
        sender_comm: "js-consumer-1".into(),
        sender_pid: 7169,
        sender_is_self: false,
        sent_from: SentFrom::Softirq { vector: Some(1) },
        what: "gc_worker".into(),
        callsite: String::new(),
    });
    e.push_interruption(rec(1, C::Kworker, 1_000, 5_000, "kworker/1:1", "gc_worker"));
    let v = one(&mut e, stall(1, 1_000, 5_000));
    assert_eq!(
        via(&v.culprits[0]),
        "queued from the TIMER softirq on CPU 1 (a timer expired: delayed work)"
    );
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
        tracer: Tracer::Run(jitterscope::model::Decision::Live),
    }
}

#[test]
fn the_ranking_aggregates_by_culprit_with_shares_of_all_stall_time() {
    let ranked = ranking_fixture().brief();
    let names: Vec<String> = ranked.iter().map(|c| c.name()).collect();
    let rows: Vec<(C, &str, u64, u64, u64)> = ranked
        .iter()
        .zip(&names)
        .map(|(c, n)| {
            (
                c.class(),
                n.as_str(),
                c.episodes,
                c.total_ns(),
                c.longest_ns,
            )
        })
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
    assert_eq!(
        ranked[0].cpus,
        [CpuTheft {
            cpu: 1,
            measured_ns: 1_100,
            inferred_ns: 0,
            host_ns: 0,
            episodes: 2,
        }]
    );
}

#[test]
fn advice_carries_the_command_for_this_machine() {
    let m = machine(&[0, 1, 2, 3], &[1, 3]);
    let a = advice(&culprit_of(C::Irq, "36 virtio1-req.0", ""), &[3], &m);
    assert!(
        a.contains("echo 0,2 > /proc/irq/36/smp_affinity_list"),
        "{a}"
    );
    let a = advice(
        &culprit_of(C::Kworker, "kworker/3:1", "vmstat_update"),
        &[3],
        &m,
    );
    assert!(a.contains("sysctl vm.stat_interval"), "{a}");
    assert!(
        a.contains("echo 5 > /sys/devices/virtual/workqueue/cpumask"),
        "{a}"
    );
    let a = advice(&culprit_of(C::TimerTick, "local timer", ""), &[3], &m);
    assert!(a.contains("nohz_full=1,3"), "{a}");
    let a = advice(&culprit_of(C::Task, "java[9]", "SCHED_OTHER"), &[3], &m);
    assert!(a.contains("cset shield --cpu 1,3"), "{a}");
    let a = advice(
        &culprit_of(C::FreqChange, "cpu 3", "3000000→1200000 kHz"),
        &[3],
        &m,
    );
    assert!(a.contains("frequency-set -g performance"), "{a}");
    let a = advice(&culprit_of(C::Unexplained, "no kernel event", ""), &[3], &m);
    assert!(a.contains("dedicated"), "{a}");
    // Every CPU measured: say it cannot be moved off all of them.
    let all = machine(&[0, 1], &[0, 1]);
    let a = advice(&culprit_of(C::Irq, "36 x", ""), &[1], &all);
    assert!(a.contains("cannot be moved off all of them"), "{a}");
}

#[test]
fn advice_on_jitterscopes_own_time_says_where_its_threads_can_go() {
    let js = "js-collector[7]";
    // A CPU was free for them: its own time on a measured CPU is a bug.
    let spare = machine(&[0, 1, 2], &[1, 2]);
    let a = advice(&culprit_of(C::SelfNoise, js, ""), &[1], &spare);
    assert!(a.contains("a bug"), "{a}");
    // Every CPU measured: deciding at the end, or a CPU left out.
    let all = machine(&[0, 1], &[0, 1]);
    let a = advice(&culprit_of(C::SelfNoise, js, ""), &[0], &all);
    assert!(
        a.contains("--attribution end") && a.contains("(0-1)"),
        "{a}"
    );
    assert!(!a.contains("a bug"), "{a}");
    let at_end = Machine {
        tracer: Tracer::Run(jitterscope::model::Decision::AtEnd {
            chosen_by_default: false,
        }),
        ..all.clone()
    };
    let a = advice(&culprit_of(C::SelfNoise, js, ""), &[0], &at_end);
    assert!(!a.contains("--attribution end"), "{a}");
    assert!(a.contains("left out of --cpus"), "{a}");
    let watch = Machine {
        tracer: Tracer::Watch,
        ..all
    };
    let a = advice(&culprit_of(C::SelfNoise, js, ""), &[0], &watch);
    assert!(a.contains("watch --cpus"), "{a}");
}

#[test]
fn a_reschedule_ipi_that_wakes_a_kworker_keeps_its_time_and_names_it() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 1_000,
        ..EngineConfig::default()
    });
    let resched = |start, end| Interruption {
        id: vector::RESCHEDULE,
        ..rec(1, C::Ipi, start, end, "reschedule", "")
    };
    e.push_interruption(resched(1_000, 4_000));
    e.push_interruption(rec(
        1,
        C::Kworker,
        4_500,
        9_000,
        "kworker/1:2",
        "refresh_vm_stats",
    ));
    // A later, unrelated IPI stays an IPI.
    e.push_interruption(resched(15_000, 16_000));
    let v = one(&mut e, stall(1, 1_000, 16_000));
    assert_eq!(
        parts(&v),
        [
            (C::Kworker, "kworker/1:2".into(), 4_500),
            (C::Ipi, "reschedule".into(), 4_500),
            (C::Unexplained, "no kernel event".into(), 6_000),
        ]
    );
    // The IPI's 3 µs and the 500 ns before the run (its exit path, inferred) stay the IPI's;
    // it names what it woke. The later IPI woke nothing.
    assert_eq!(split(&v.culprits[1..2]), [(C::Ipi, 4_000, 500)]);
    assert_eq!(via(&v.culprits[1]), "woke kworker/1:2");
    assert_eq!(v.culprits[1].episodes, 2);
}

#[test]
fn a_reschedule_ipi_before_a_throttled_stretch_woke_nothing() {
    let mut e = Engine::new(EngineConfig {
        edge_ns: 1_000,
        ..EngineConfig::default()
    });
    e.push_interruption(Interruption {
        id: vector::RESCHEDULE,
        ..rec(1, C::Ipi, 1_000, 4_000, "reschedule", "")
    });
    e.push_interruption(rec(
        1,
        C::Throttled,
        4_500,
        9_000,
        "scheduler",
        "RT throttling (sched_rt_runtime_us) of a SCHED_FIFO thread",
    ));
    let v = one(&mut e, stall(1, 1_000, 9_000));
    let ipi = v.culprits.iter().find(|c| c.class() == C::Ipi).unwrap();
    assert_eq!(via(ipi), "");
}

#[test]
fn spikes_are_decided_in_receipt_order_however_they_arrive() {
    let mut e = exact();
    // Out of order, with a tie: decided by receipt, a tie in the order pushed, and only
    // those the watermark has passed.
    let order = [(30, 25), (10, 5), (20, 15), (10, 6), (40, 35)];
    for &(receive_ns, publish_ns) in &order {
        e.push_spike(
            Spike {
                consumer: 0,
                publish_ns,
                receive_ns,
            },
            0,
            3,
        );
    }
    e.advance(30);
    let first: Vec<(u64, u64)> = e
        .take_spikes()
        .iter()
        .map(|v| (v.spike.receive_ns, v.spike.publish_ns))
        .collect();
    assert_eq!(first, [(10, 5), (10, 6), (20, 15), (30, 25)]);
    e.finish();
    let rest: Vec<u64> = e.take_spikes().iter().map(|v| v.spike.receive_ns).collect();
    assert_eq!(rest, [40]);
}

#[test]
fn a_message_spike_is_explained_inside_its_window_with_the_two_sides_apart() {
    let mut e = exact();
    // Producer CPU 0: stalled 100..300 by an IRQ; it published at 200, inside that stall, so
    // the message was held until 300. Consumer CPU 3: stalled 250..1_250, a kworker
    // 250..1_050 then nothing; received at 1_250.
    e.push_interruption(rec(0, C::Irq, 100, 300, "36 virtio1-req.0", ""));
    e.push_interruption(rec(
        3,
        C::Kworker,
        250,
        1_050,
        "kworker/3:1",
        "vmstat_update",
    ));
    e.push_stall(producer_stall(0, 100, 300));
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
    // The consumer's 250..300 overlaps the producer's hold: it counts once, to the producer.
    assert_eq!((v.producer_stalled_ns, v.consumer_stalled_ns), (100, 950));
    assert_eq!(split(&v.producer_culprits), [(C::Irq, 100, 0)]);
    assert_eq!(
        split(&v.consumer_culprits),
        [(C::Kworker, 750, 0), (C::Unexplained, 200, 0)]
    );
    assert!((v.consumer_culprits[0].share - 750.0 / 1_050.0).abs() < 1e-9);
    assert!(e.take_spikes().is_empty(), "handed over once");
}

#[test]
fn a_spike_never_names_more_than_its_transit() {
    let mut e = Engine::new(EngineConfig::default());
    // Both sides stalled through the whole window, by causes that run far outside it; a
    // producer stall after the publish cannot have delayed the message.
    e.push_interruption(rec(0, C::Task, 0, 50_000, "stress[7]", "SCHED_OTHER"));
    e.push_interruption(rec(3, C::Irq, 0, 50_000, "36 x", ""));
    e.push_stall(producer_stall(0, 0, 10_000));
    e.push_stall(producer_stall(0, 12_000, 40_000));
    e.push_stall(stall(3, 0, 30_000));
    e.push_spike(
        Spike {
            consumer: 0,
            publish_ns: 5_000,
            receive_ns: 30_000,
        },
        0,
        3,
    );
    e.finish();
    let v = &e.take_spikes()[0];
    let named: u64 = v
        .producer_culprits
        .iter()
        .chain(&v.consumer_culprits)
        .map(|c| c.ns())
        .sum();
    assert_eq!(named, 25_000, "{v:?}");
    assert_eq!(
        (v.producer_stalled_ns, v.consumer_stalled_ns),
        (5_000, 20_000)
    );
    assert_eq!(split(&v.producer_culprits), [(C::Task, 5_000, 0)]);
    assert_eq!(split(&v.consumer_culprits), [(C::Irq, 20_000, 0)]);
}

#[test]
fn a_long_record_reaches_a_stall_far_after_its_start_among_many_short_ones() {
    let mut e = exact();
    // A 50 ms task run, then a storm of 2 µs interrupts every 10 µs after it started: the
    // long one is held apart, yet still found by a stall 40 ms in.
    e.push_interruption(rec(1, C::Task, 0, 50_000_000, "stress[7]", "SCHED_OTHER"));
    for k in 0..5_000u64 {
        let t = 1_000 + k * 10_000;
        e.push_interruption(rec(1, C::TimerTick, t, t + 2_000, "local timer", ""));
    }
    e.push_stall(stall(1, 40_000_000, 40_004_000));
    e.push_stall(stall(1, 40_003_000, 40_009_000));
    let v = e.finish();
    assert_eq!(
        parts(&v[0]),
        [
            (C::Task, "stress[7]".to_string(), 2_000),
            (C::TimerTick, "local timer".to_string(), 2_000)
        ]
    );
    assert_eq!(parts(&v[1]), [(C::Task, "stress[7]".to_string(), 6_000)]);
}

#[test]
fn a_send_that_arrived_after_later_ones_is_still_found() {
    let mut e = exact();
    let send = |at: u64, what: &str| Cause {
        target_cpu: 1,
        at_ns: at,
        kind: CauseKind::QueueWork,
        sender_cpu: 0,
        sender_comm: format!("q{at}"),
        sender_pid: at as u32,
        sender_is_self: false,
        sent_from: SentFrom::Task,
        what: what.into(),
        callsite: String::new(),
    };
    // Out of time order, as two CPUs' records interleave in the drain.
    e.push_cause(send(5_000, "other_work"));
    e.push_cause(send(900, "vmstat_update"));
    e.push_cause(send(6_000, "vmstat_update"));
    e.push_interruption(rec(
        1,
        C::Kworker,
        1_000,
        2_000,
        "kworker/1:1",
        "vmstat_update",
    ));
    let v = one(&mut e, stall(1, 1_000, 2_000));
    assert!(
        via(&v.culprits[0]).contains("q900[900]"),
        "{:?}",
        via(&v.culprits[0])
    );
}

#[test]
fn spikes_see_only_their_own_threads_stalls_among_many() {
    let mut e = exact();
    // A thousand consumer stalls before the spike, and one producer stall on the same CPU
    // that a consumer's spike must not take for its own.
    for k in 0..1_000u64 {
        e.push_stall(stall(3, k * 1_000, k * 1_000 + 100));
    }
    e.push_interruption(rec(3, C::Irq, 2_000_050, 2_000_250, "36 virtio1-req.0", ""));
    e.push_stall(stall(3, 2_000_000, 2_000_300));
    e.push_stall(producer_stall(3, 2_000_000, 2_000_900));
    e.push_spike(
        Spike {
            consumer: 0,
            publish_ns: 1_999_990,
            receive_ns: 2_000_300,
        },
        0,
        3,
    );
    e.finish();
    let v = &e.take_spikes()[0];
    assert_eq!(v.consumer_stalled_ns, 300);
    assert_eq!(
        split(&v.consumer_culprits),
        [(C::Irq, 200, 0), (C::Unexplained, 100, 0)]
    );
}

#[test]
fn deciding_in_steps_gives_the_verdicts_of_deciding_at_once() {
    let feed = |e: &mut Engine| {
        for k in 0..200u64 {
            let t = k * 10_000;
            e.push_interruption(rec(1, C::Irq, t + 100, t + 600, "36 virtio1-req.0", ""));
            e.push_stall(stall(1, t, t + 1_000));
        }
    };
    let (mut a, mut b) = (exact(), exact());
    feed(&mut a);
    feed(&mut b);
    let all = a.advance(1_500_000);
    let mut steps = Vec::new();
    let mut calls = 0;
    while b.advance_some(1_500_000, 7, &mut steps) {
        calls += 1;
    }
    assert!(calls >= 150 / 7, "{calls} steps");
    assert_eq!(all.len(), 150);
    assert_eq!(all, steps);
}

/// A wait behind thousands of runnable threads: every task is counted, each of the 64 that
/// took the most by its pid, the others folded by command name (no pid), the sums unchanged;
/// a culprit met again and again in one stall is one share, past the scanned few as before.
#[test]
fn a_stall_behind_many_tasks_names_the_longest_and_folds_the_rest_by_name() {
    let named = jitterscope::attribution::engine::PIDS_NAMED;
    let mut e = exact();
    let mut t = 1_000;
    let mut expect_ns = 0;
    // Task i (pid 1000 + i) runs i + 1 times for 1 µs each, interleaved: 200 tasks.
    for round in 0..200u64 {
        for i in round..200 {
            let name = format!("worker[{}]", 1000 + i);
            e.push_interruption(rec(1, C::Task, t, t + 1_000, &name, ""));
            t += 1_000;
            expect_ns += 1_000;
        }
    }
    let v = one(&mut e, stall(1, 1_000, t));
    let tasks: Vec<&Share> = v.culprits.iter().filter(|c| c.class() == C::Task).collect();
    let pid_of = |c: &Share| match &c.culprit.who {
        Who::Task { pid, .. } => *pid,
        other => panic!("not a task: {other:?}"),
    };
    let told_apart: Vec<u32> = tasks
        .iter()
        .map(|c| pid_of(c))
        .filter(|&p| p != jitterscope::model::ANY_PID)
        .collect();
    assert_eq!(told_apart.len(), named, "{:?}", parts(&v));
    // The longest: pids 1199 (200 runs) down to 1136 (137 runs), each with all its runs.
    let mut want: Vec<u32> = (1200 - named as u32..1200).collect();
    want.reverse();
    assert_eq!(told_apart, want);
    for c in &tasks {
        if pid_of(c) != jitterscope::model::ANY_PID {
            assert_eq!(c.episodes, pid_of(c) - 1000 + 1, "{c:?}");
            assert_eq!(c.measured_ns, u64::from(c.episodes) * 1_000);
        }
    }
    let folded: Vec<&&Share> = tasks
        .iter()
        .filter(|c| pid_of(c) == jitterscope::model::ANY_PID)
        .collect();
    assert_eq!(folded.len(), 1, "{:?}", parts(&v));
    let rest_runs: u32 = (0..200 - named as u32).map(|i| i + 1).sum();
    assert_eq!(folded[0].episodes, rest_runs);
    assert_eq!(folded[0].name(), "worker");
    let total: u64 = tasks.iter().map(|c| c.measured_ns).sum();
    assert_eq!(total, expect_ns);
    // Longest first still.
    assert!(v.culprits.windows(2).all(|w| w[0].ns() >= w[1].ns()));
}
