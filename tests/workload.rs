//! The workload end to end (no BPF): the ring under concurrency, the run's measurements,
//! and stall detection on a thread that a competing pinned busy loop pushes off its CPU.

mod common;

use common::{exclusive, fewer_cpus_than, nproc, Competitor};
use std::sync::atomic::Ordering;

use jitterscope::model::{Spike, Stall, ThreadRole};
use jitterscope::workload::ring::ring;
use jitterscope::workload::{Output, Workload, WorkloadConfig};

#[test]
fn ring_delivers_every_message_to_every_consumer_in_order() {
    let _cpus = exclusive();
    const N: u64 = 300_000;
    let (mut publisher, subs) = ring(64, 3);
    let consumers: Vec<_> = subs
        .into_iter()
        .map(|mut sub| {
            std::thread::spawn(move || {
                let mut expected = 0u64;
                while expected < N {
                    while let Some(m) = sub.poll() {
                        assert_eq!(m.seq, expected, "lost, duplicated or reordered");
                        assert_eq!(m.publish_ns, expected * 3, "payload torn");
                        expected += 1;
                    }
                    sub.release();
                    std::thread::yield_now();
                }
                expected
            })
        })
        .collect();
    for i in 0..N {
        while !publisher.try_publish(i * 3) {
            std::thread::yield_now();
        }
    }
    for c in consumers {
        assert_eq!(c.join().unwrap(), N);
    }
}

fn online_cpus() -> usize {
    nproc()
}

fn short_config() -> WorkloadConfig {
    let mut cfg = WorkloadConfig::new(0, vec![1]);
    cfg.warmup_ns = 100_000_000;
    cfg.duration_ns = 1_500_000_000;
    cfg.histogram_interval_ns = 250_000_000;
    cfg
}

/// Runs a workload to its end, collecting stalls and summing the interval histograms.
/// What a run produced: stalls, spikes, message counts and interval count.
struct Ran {
    wl: Workload,
    stalls: Vec<Stall>,
    spikes: Vec<Spike>,
    transit: u64,
    inter: u64,
    intervals: usize,
}

fn run_to_end(cfg: WorkloadConfig) -> Ran {
    let mut wl = Workload::start(cfg).expect("workload starts");
    let mut stalls = Vec::new();
    let mut spikes = Vec::new();
    let (mut transit, mut inter, mut intervals) = (0u64, 0u64, 0usize);
    let mut sink = |o: Output| match o {
        Output::Stall(s) => {
            stalls.push(s);
            None
        }
        Output::Spike(s) => {
            spikes.push(s);
            None
        }
        Output::Interval { hists, .. } => {
            transit += hists.transit.len();
            inter += hists.inter_message.len();
            intervals += 1;
            Some(hists)
        }
    };
    while !wl.finished() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        wl.drain(&mut sink);
    }
    wl.join();
    wl.drain(&mut sink);
    Ran {
        wl,
        stalls,
        spikes,
        transit,
        inter,
        intervals,
    }
}

#[test]
fn a_run_measures_every_message_and_names_its_threads() {
    let _cpus = exclusive();
    if fewer_cpus_than("a_run_measures_every_message_and_names_its_threads", 2) {
        return;
    }
    let cfg = short_config();
    let Ran {
        wl,
        transit,
        inter,
        intervals,
        ..
    } = run_to_end(cfg.clone());
    let threads = wl.threads();
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0].role, ThreadRole::Producer);
    assert_eq!(threads[0].name, "js-producer");
    assert_eq!(threads[1].name, "js-consumer-1");
    assert_eq!(threads[1].cpu, Some(1));
    assert!(threads.iter().all(|t| t.tid > 0));
    let counters = &wl.counters()[1].1;
    assert_eq!(counters.sequence_errors.load(Ordering::Relaxed), 0);
    let messages = counters.messages.load(Ordering::Relaxed);
    assert_eq!(
        transit, messages,
        "every recorded message is in the histograms"
    );
    assert_eq!(
        inter + 1,
        transit,
        "one inter-message time per message after the first"
    );
    // At 10 µs per message for 1.5 s the producer publishes at most 150 k messages; stalls
    // only remove some. Not a speed assertion: a bound on what the schedule allows.
    assert!(
        messages > 1_000 && messages <= 150_001,
        "messages {messages}"
    );
    assert!(intervals >= 5, "interval histograms rotate ({intervals})");
}

#[test]
fn a_competing_busy_loop_shows_as_stalls_on_its_cpu() {
    let _cpus = exclusive();
    if fewer_cpus_than("a_competing_busy_loop_shows_as_stalls_on_its_cpu", 2) {
        return;
    }
    let cfg = short_config();
    let _hog = Competitor::start(1);
    let Ran {
        wl, stalls, spikes, ..
    } = run_to_end(cfg.clone());
    let from = wl.record_from_ns();
    let on_consumer: Vec<&Stall> = stalls.iter().filter(|s| s.cpu == 1).collect();
    let stolen: u64 = on_consumer.iter().map(|s| s.duration_ns()).sum();
    // CFS shares CPU 1 between the consumer and the hog in slices of milliseconds, so the
    // consumer loses a large part of the run in stalls of at least a tick.
    assert!(
        stolen > cfg.duration_ns / 5,
        "only {stolen} ns of stalls on CPU 1 while a busy loop shared it"
    );
    assert!(on_consumer.iter().any(|s| s.duration_ns() >= 1_000_000));
    for s in &on_consumer {
        assert_eq!(s.thread, ThreadRole::Consumer(0));
        assert!(s.start_ns >= from, "stall starts before recording");
        assert!(
            s.end_ns <= wl.end_ns() + 200_000_000,
            "stall ends after the run"
        );
        assert!(s.duration_ns() > cfg.stall_threshold_ns);
    }
    // The consumer's stalls delay messages: spikes, one per delay episode, each with the
    // window that a stall of the consumer explains.
    assert!(
        !spikes.is_empty(),
        "no transit spikes while the consumer lost its CPU"
    );
    for sp in &spikes {
        assert!(sp.transit_ns() > cfg.spike_threshold_ns);
    }
    assert!(
        spikes
            .windows(2)
            .all(|w| w[1].publish_ns >= w[0].receive_ns),
        "one spike per episode"
    );
    let explained = spikes
        .iter()
        .filter(|sp| {
            stalls
                .iter()
                .any(|s| s.start_ns < sp.receive_ns && s.end_ns > sp.publish_ns)
        })
        .count();
    assert!(
        explained * 10 >= spikes.len() * 9,
        "{explained} of {} spikes overlap a stall of the producer or the consumer",
        spikes.len()
    );
    // Stalls of one thread never overlap each other.
    let mut sorted = on_consumer.clone();
    sorted.sort_by_key(|s| s.start_ns);
    assert!(sorted.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
}

#[test]
fn unpinned_threads_report_the_cpu_they_stalled_on() {
    let _cpus = exclusive();
    let mut cfg = short_config();
    cfg.pin = false;
    cfg.duration_ns = 500_000_000;
    let Ran {
        wl,
        stalls,
        transit,
        ..
    } = run_to_end(cfg);
    assert!(wl.threads().iter().all(|t| t.cpu.is_none()));
    assert!(transit > 0);
    let online = online_cpus() as u32;
    assert!(stalls.iter().all(|s| s.cpu < online.max(1)));
}
