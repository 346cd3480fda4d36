//! Output formats against golden files: the seed's histogram blocks and HdrHistogram's
//! `.hgrm` percentile distribution. Regenerate with `UPDATE_GOLDEN=1 cargo test --test formats`
//! (it rewrites the files and fails, saying so); check the new output by eye, then run again
//! without it.

mod common;

use common::golden;

use hdrhistogram::Histogram;
use jitterscope::model::{CulpritClass, Ended};
use jitterscope::report::{hgrm, seed};

fn fixture() -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
    // A latency distribution with a body and a tail, like a real run's.
    for i in 0..10_000u64 {
        h.record(100 + i % 200).unwrap();
    }
    for v in [2_500, 8_000, 45_000, 180_000, 1_200_000] {
        h.record(v).unwrap();
    }
    h
}

#[test]
fn seed_block_matches_golden() {
    let s = seed::Summary::of(&fixture());
    golden(
        "transit_block.txt",
        &seed::block("Accumulator Message Transit Latency", &s),
    );
}

#[test]
fn hgrm_matches_golden() {
    golden(
        "transit.hgrm",
        &hgrm::percentile_distribution(&fixture(), 1000.0),
    );
}

#[test]
fn hgrm_is_parseable_like_hdrhistograms_plotter_reads_it() {
    // The plotter reads whitespace-separated columns, skipping '#' lines and the header.
    let text = hgrm::percentile_distribution(&fixture(), 1000.0);
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() > 20);
    assert!(rows
        .windows(2)
        .all(|w| w[0][1] <= w[1][1] && w[0][0] <= w[1][0]));
    let last = rows.last().unwrap();
    assert_eq!(last.len(), 3, "the 100% line has no 1/(1-p) column");
    assert_eq!(last[1], 1.0);
    assert_eq!(last[2], 10_005.0);
}

/// A run with probes: two culprits, an unexplained share, an incomplete stall, a lost-data
/// warning. Everything deterministic so the rendered reports can be golden files.
fn run_fixture() -> jitterscope::report::runfile::RunFile {
    use jitterscope::report::runfile::*;
    let summary = seed::Summary::of(&fixture());
    let culprit =
        |class: CulpritClass, name: &str, detail: &str, via: &str, ns: u64, share: f64| {
            StallCulprit {
                class,
                name: name.into(),
                detail: detail.into(),
                via: via.into(),
                measured_ns: ns,
                inferred_ns: 0,
                host_ns: 0,
                episodes: 1,
                share,
                container: None,
            }
        };
    RunFile {
        schema: SCHEMA.into(),
        mode: jitterscope::report::runfile::Mode::Run,
        watch: None,
        threads: Vec::new(),
        run: RunInfo {
            label: "golden".into(),
            cpus: vec![1, 3],
            producer_cpu: 1,
            consumer_cpus: vec![3],
            start_unix_ns: 1_795_387_501_000_000_000,
            record_from_ns: 1_000_000_000,
            duration_ns: 30_000_000_000,
            kernel: "6.18.0".into(),
            host: "bench".into(),
            ended: Ended::Completed,
            end_reason: String::new(),
            settings: Settings {
                pinned: true,
                interval_ns: 10_000,
                warmup_ns: 1_000_000_000,
                planned_duration_ns: 30_000_000_000,
                stall_threshold_ns: 1_000,
                spike_threshold_ns: 10_000,
                stall_threshold_auto: true,
                probes: true,
                consumer_fifo: None,
            },
            floor: Some(Floor {
                from_cpu: 1,
                to_cpu: 3,
                min_ns: 52,
                p50_ns: 58,
                p99_ns: 71,
                rounds: 50_000,
            }),
        },
        histograms: vec![ConsumerHistograms {
            consumer: "accumulator".into(),
            cpu: 3,
            transit: summary.clone(),
            inter_message: summary,
        }],
        stall_summary: StallSummary {
            count: 3,
            total_ns: 400_000,
            longest_ns: 182_400,
            per_cpu: vec![CpuStalls {
                cpu: 3,
                count: 3,
                total_ns: 400_000,
                longest_ns: 182_400,
            }],
        },
        stalls: vec![
            StallEntry {
                cpu: 3,
                thread: "accumulator".into(),
                start_ns: 13_345_678_000,
                end_ns: 13_345_860_400,
                duration_ns: 182_400,
                explained_share: Some(0.954),
                culprits: vec![
                    culprit(
                        CulpritClass::Kworker,
                        "kworker/3:1",
                        "vmstat_update",
                        "queued by swapper/3[0] on CPU 3",
                        171_000,
                        0.9375,
                    ),
                    StallCulprit {
                        inferred_ns: 1_200,
                        ..culprit(
                            CulpritClass::TimerTick,
                            "local timer",
                            "scheduler tick",
                            "",
                            3_100,
                            0.0236,
                        )
                    },
                    culprit(
                        CulpritClass::Hypervisor,
                        "host preemption",
                        "the host kept vCPU 3 off its physical CPU (KVM steal clock)",
                        "",
                        5_000,
                        0.0274,
                    ),
                    culprit(
                        CulpritClass::Unexplained,
                        "no kernel event",
                        "no kernel event and no steal: host interrupt handling, VM exits, SMI or hardware",
                        "",
                        2_100,
                        0.0115,
                    ),
                ],
                incomplete: false,
                timeline: vec![],
            },
            StallEntry {
                cpu: 3,
                thread: "accumulator".into(),
                start_ns: 21_000_000_000,
                end_ns: 21_000_120_000,
                duration_ns: 120_000,
                explained_share: Some(1.0),
                culprits: vec![culprit(CulpritClass::Irq, "36 virtio1-req.0", "", "", 120_000, 1.0)],
                incomplete: true,
                timeline: vec![],
            },
        ],
        culprits: vec![
            CulpritEntry {
                class: CulpritClass::Kworker,
                name: "kworker/3:1".into(),
                detail: "vmstat_update".into(),
                episodes: 2,
                measured_ns: 271_000,
                inferred_ns: 0,
                host_ns: 0,
                longest_ns: 171_000,
                share: 0.6775,
                advice: "sysctl vm.stat_interval=10".into(),
                cpus: vec![CpuTheftEntry {
                    cpu: 3,
                    measured_ns: 271_000,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 0,
                }],
                vector: None,
                processes: None,
                who: None,
            },
            CulpritEntry {
                class: CulpritClass::Irq,
                name: "36 virtio1-req.0".into(),
                detail: String::new(),
                episodes: 1,
                measured_ns: 120_000,
                inferred_ns: 0,
                host_ns: 0,
                longest_ns: 120_000,
                share: 0.3,
                advice: "echo 0,2 > /proc/irq/36/smp_affinity_list".into(),
                cpus: vec![CpuTheftEntry {
                    cpu: 3,
                    measured_ns: 120_000,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 0,
                }],
                vector: None,
                processes: None,
                who: None,
            },
            CulpritEntry {
                class: CulpritClass::TimerTick,
                name: "local timer".into(),
                detail: "scheduler tick".into(),
                episodes: 1,
                measured_ns: 3_100,
                inferred_ns: 1_200,
                host_ns: 0,
                longest_ns: 3_100,
                share: 0.01075,
                advice: "nohz_full=3".into(),
                cpus: vec![CpuTheftEntry {
                    cpu: 3,
                    measured_ns: 3_100,
                    inferred_ns: 1_200,
                    host_ns: 0,
                    episodes: 0,
                }],
                vector: None,
                processes: None,
                who: None,
            },
            CulpritEntry {
                class: CulpritClass::Hypervisor,
                name: "host preemption".into(),
                detail: "KVM steal clock".into(),
                episodes: 1,
                measured_ns: 5_000,
                inferred_ns: 0,
                host_ns: 0,
                longest_ns: 5_000,
                share: 0.0125,
                advice: "dedicated vCPUs".into(),
                cpus: vec![CpuTheftEntry {
                    cpu: 3,
                    measured_ns: 5_000,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 0,
                }],
                vector: None,
                processes: None,
                who: None,
            },
            CulpritEntry {
                class: CulpritClass::Unexplained,
                name: "no kernel event".into(),
                detail: "hypervisor preemption, SMI or hardware".into(),
                episodes: 1,
                measured_ns: 9_000,
                inferred_ns: 0,
                host_ns: 0,
                longest_ns: 8_300,
                share: 0.0225,
                advice: "dedicated vCPUs".into(),
                cpus: vec![CpuTheftEntry {
                    cpu: 3,
                    measured_ns: 9_000,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 0,
                }],
                vector: None,
                processes: None,
                who: None,
            },
        ],
        spike_count: 1,
        spikes: vec![SpikeEntry {
            consumer: "accumulator".into(),
            producer_cpu: 1,
            consumer_cpu: 3,
            publish_ns: 13_345_670_000,
            receive_ns: 13_345_861_000,
            transit_ns: 191_000,
            producer_stalled_ns: 0,
            consumer_stalled_ns: 182_400,
            producer_culprits: vec![],
            consumer_culprits: vec![
                culprit(
                    CulpritClass::Kworker,
                    "kworker/3:1",
                    "vmstat_update",
                    "",
                    171_000,
                    0.895,
                ),
                culprit(CulpritClass::TimerTick, "local timer", "", "", 3_100, 0.016),
                culprit(
                    CulpritClass::Unexplained,
                    "no kernel event",
                    "hypervisor preemption, SMI or hardware",
                    "",
                    8_300,
                    0.043,
                ),
            ],
        }],
        lost: Lost {
            ring_buffer_drops: 12,
            workload_queue_drops: 0,
            sequence_errors: 0,
            threads_not_watched: 0,
        },
        probes: Some(ProbeInfo {
            unavailable: vec!["thermal_apic_entry".into()],
            events: vec![
                CpuCount {
                    cpu: 1,
                    count: 5_000,
                },
                CpuCount {
                    cpu: 3,
                    count: 7_000,
                },
            ],
            drops: vec![CpuCount { cpu: 3, count: 12 }],
            costs: vec![ProgramCostEntry {
                program: "sched_switch".into(),
                run_count: 10_000,
                run_time_ns: 1_750_000,
            }],
            incomplete_stalls: 1,
            stats_enabled: true,
            symbols: true,
            steal_clock: true,
            steal_note: String::new(),
            steal: vec![CpuSteal {
                cpu: 3,
                steal_ns: 41_000,
            }],
        }),
        overhead: Some(Overhead {
            window_ns: 30_000_000_000,
            tracer_cpu_ns: 41_000_000,
            bpf_run_ns: 1_750_000,
            bpf_events: 10_000,
            longest_self: vec![jitterscope::report::runfile::CpuLongest {
                cpu: 1,
                ns: 84_000,
            }],
            collector_budget: Some(0.02),
            held_back: 3,
            after_cpu_ns: 9_400_000,
            at_end: false,
            decided_in_run: 0,
            files_cpu_ns: 3_100_000,
        }),
        config: None,
    }
}

#[test]
fn text_report_matches_golden() {
    golden(
        "report.txt",
        &jitterscope::report::text::render(&run_fixture(), false),
    );
}

#[test]
fn markdown_report_matches_golden() {
    golden(
        "report.md",
        &jitterscope::report::text::render_markdown(&run_fixture()),
    );
}

#[test]
fn the_run_file_round_trips_through_json() {
    let run = run_fixture();
    let back = jitterscope::report::runfile::RunFile::from_json("fixture", &run.to_json()).unwrap();
    assert_eq!(back, run);
}

#[test]
fn the_perfetto_trace_is_valid_trace_event_json() {
    let mut run = run_fixture();
    run.stalls[0].timeline = vec![jitterscope::report::runfile::TimelineRecord {
        cpu: 3,
        class: jitterscope::model::CulpritClass::Kworker,
        start_ns: 13_345_680_000,
        end_ns: 13_345_851_000,
        id: 41,
        name: "kworker/3:1".into(),
        detail: "vmstat_update".into(),
        pid: 41,
        parent: None,
        victim: 0,
    }];
    let v: serde_json::Value =
        serde_json::from_str(&jitterscope::report::perfetto::render(&run)).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(
        slices.len(),
        4,
        "two stalls, one kernel record, one late message"
    );
    let k = slices
        .iter()
        .find(|e| e["name"] == "kworker/3:1 vmstat_update")
        .unwrap();
    assert_eq!(k["tid"], 10, "CPU 3's kernel track");
    assert_eq!(k["ts"], 12_345_680.0);
    assert_eq!(k["dur"], 171.0);
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "CPU 3 kernel"));
}

#[test]
fn compare_matches_golden_and_its_chart_has_one_curve_per_run() {
    use jitterscope::report::compare;
    let a = run_fixture();
    let mut b = run_fixture();
    b.run.label = "pinned".into();
    b.histograms[0]
        .transit
        .percentiles
        .insert("99.99".into(), 9_000);
    b.histograms[0].transit.max = 20_000;
    // The IRQ is gone in the second run; a new task appeared.
    b.culprits.retain(|c| c.class != CulpritClass::Irq);
    let mut task = b.culprits[0].clone();
    task.class = CulpritClass::Task;
    task.name = "stress[999]".into();
    task.detail = "SCHED_OTHER".into();
    task.measured_ns = 50_000;
    b.culprits.push(task);
    // The configuration: the IRQ was steered off the measured CPUs between the runs.
    let mut a = a;
    let irq = |affinity: Vec<u32>| jitterscope::system::config::IrqConfig {
        irq: 36,
        name: "virtio1-req.0".into(),
        affinity,
        ..Default::default()
    };
    a.config = Some(jitterscope::system::config::Configured {
        kernel: "6.8".into(),
        irqs: vec![irq(vec![0, 1, 2, 3])],
        ..Default::default()
    });
    for c in a
        .culprits
        .iter_mut()
        .filter(|c| c.class == CulpritClass::Irq)
    {
        c.who = Some(jitterscope::report::runfile::WhoEntry {
            irq: Some(36),
            action: Some("virtio1-req.0".into()),
            ..Default::default()
        });
        for t in &mut c.cpus {
            t.episodes = 3_600;
        }
    }
    let mut config = a.config.clone().unwrap();
    config.irqs = vec![irq(vec![0])];
    b.config = Some(config);
    let runs = vec![("a.json".to_string(), a), ("b.json".to_string(), b)];
    golden("compare.md", &compare::render(&runs));
    let svg = compare::chart(&runs);
    assert_eq!(svg.matches("<path").count(), 2);
    assert!(svg.contains(">#1 golden<") && svg.contains(">#2 pinned<"));
    // Valid XML: every opened element is closed.
    let opened = svg.matches("<svg").count() + svg.matches("<text").count();
    let closed = svg.matches("</svg>").count() + svg.matches("</text>").count();
    assert_eq!(opened, closed);
}

#[test]
fn a_first_schema_run_file_is_still_read_and_reported() {
    let path = format!("{}/tests/golden/run_v1.json", env!("CARGO_MANIFEST_DIR"));
    let run = jitterscope::report::runfile::RunFile::read(std::path::Path::new(&path)).unwrap();
    assert_eq!(run.schema, jitterscope::report::runfile::SCHEMA_V1);
    // Its times were all measured-or-credited in one figure: read as measured, nothing
    // inferred; its stall counts as episodes; its spikes' one list as the consumer side.
    let c = &run.culprits[0];
    assert_eq!(
        (c.measured_ns, c.inferred_ns, c.episodes, c.longest_ns),
        (3, 0, 1, 3)
    );
    assert_eq!(c.cpus[0].measured_ns, 3);
    assert_eq!(run.stalls[0].culprits[0].measured_ns, 3);
    assert_eq!(run.spikes[0].consumer_culprits.len(), 1);
    assert!(run.spikes[0].producer_culprits.is_empty());
    let text = jitterscope::report::text::render(&run, false);
    assert!(text.contains("kworker/3:1 vmstat_update"), "{text}");
}
