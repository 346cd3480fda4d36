//! Property tests for everything that reads untrusted input: the command line's values
//! (durations, sizes, rates, CPU lists, noise specs) and the run file, with every renderer
//! that draws from it. The properties: no input panics; every valid spelling parses to the
//! exact value; every error names the value or the flag, and a fix; a run file round-trips
//! exactly; whatever parses renders in every format.
//!
//! Case counts keep the whole binary at a few seconds in release mode; the fuzz target in
//! tests/fuzz/ (scripts/fuzz.sh) searches the run-file reader far longer.

use clap::Parser;
use proptest::prelude::*;
use proptest::sample::Index;

use jitterscope::cli::{self, parse_cpu_list, parse_duration, parse_rate, parse_size, Cli};
use jitterscope::model::{CulpritClass, Ended};
use jitterscope::report::runfile::TimelineRecord;
use jitterscope::report::runfile::{
    ConsumerHistograms, CpuCount, CpuStalls, CpuSteal, CpuTheftEntry, CulpritEntry, Floor, Lost,
    Overhead, ProbeInfo, ProcessEntry, ProcessesEntry, ProgramCostEntry, RunFile, RunInfo,
    Settings, SpikeEntry, StallCulprit, StallEntry, StallSummary, SCHEMA,
};
use jitterscope::report::seed::{Summary, PERCENTILES};
use jitterscope::report::{compare, export};
use jitterscope::system::cpus::Topology;
use jitterscope::workshop::noise::{parse_spec, NoiseKind};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Command-line values
// ---------------------------------------------------------------------------------------------

/// Text a user could type, weighted towards the characters valid spellings use so that the
/// parsers get past their first check: unicode, huge numbers, signs, empty.
fn typed_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        3 => "[-+0-9.,@:/ µKMGiBbkwoqrtasmhnuefdlxiI]{0,16}",
        2 => "[-0-9]{0,24}[a-zµ/]{0,3}",
        1 => "[0-9]{1,10}-[0-9]{1,10}(,[0-9]{1,10}-[0-9]{1,10}){0,2}",
        1 => "(kworker|irq|task|timer|freq|IRQ|x)@[-0-9]{0,12}:[-0-9]{0,12}(/s)?",
        1 => prop::sample::select(vec![
            "", " ", "-", "--", ".", "..", "-0", "0", "µs", "1µs", "1e9s", "NaN", "inf",
            "18446744073709551616", "99999999999999999999ns", "1.7976931348623157e308s",
            "4294967296", "0-4294967295", "4294967295", "1-", "-1", ",", "1,,3", "@:", "@1:",
        ])
        .prop_map(String::from),
    ]
}

/// A topology with gaps: `present` is 0..n, `online` and `allowed` are subsets of it.
fn topology() -> impl Strategy<Value = Topology> {
    (2u32..48).prop_flat_map(|n| {
        (
            Just(n),
            prop::collection::vec(prop::bool::weighted(0.85), n as usize),
            prop::collection::vec(prop::bool::weighted(0.85), n as usize),
        )
            .prop_map(|(n, on, al)| {
                let present: Vec<u32> = (0..n).collect();
                let online: Vec<u32> = present
                    .iter()
                    .copied()
                    .filter(|&c| on[c as usize])
                    .collect();
                let allowed: Vec<u32> =
                    online.iter().copied().filter(|&c| al[c as usize]).collect();
                Topology {
                    present,
                    online,
                    allowed,
                }
            })
    })
}

/// A message "says how to fix it" when it gives an example, the accepted values or the
/// accepted range. Checked on every error so a bare "too large" cannot come back.
fn has_fix(msg: &str) -> bool {
    [
        "e.g.",
        "units:",
        "write ",
        "outside 1 to 10000",
        "the smallest",
        "the largest",
        "one page (4K)",
        "above 1G",
        "this machine has CPUs",
        "bring it up with",
        "choose from those",
        "a CPU of their own",
    ]
    .iter()
    .any(|s| msg.contains(s))
}

/// Parses `args` after the program name, returning clap's rendered error if any.
fn clap_error(args: &[&str]) -> Option<String> {
    let mut argv = vec!["jitterscope"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).err().map(|e| e.to_string())
}

const DURATION_UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const SIZE_UNITS: [(&str, u64); 13] = [
    ("", 1),
    ("B", 1),
    ("K", 1 << 10),
    ("k", 1 << 10),
    ("KB", 1 << 10),
    ("KiB", 1 << 10),
    ("kib", 1 << 10),
    ("M", 1 << 20),
    ("MB", 1 << 20),
    ("MiB", 1 << 20),
    ("G", 1 << 30),
    ("g", 1 << 30),
    ("GiB", 1 << 30),
];

fn spaces() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", " ", "  ", "\t"])
}

proptest! {
    #![proptest_config(config(5_000))]

    #[test]
    fn cli_parsers_never_panic(text in typed_text(), topo in topology(), min in 0usize..4) {
        // Each returns a Result; reaching the end is the property (a panic fails the case).
        let _ = parse_duration(&text);
        let _ = parse_size(&text);
        let _ = parse_rate(&text);
        if let Err(e) = parse_spec(&text) {
            prop_assert!(e.starts_with(&format!("--inject {text}: ")), "{e}");
            prop_assert!(has_fix(&e), "no fix in: {e}");
        }
        if let Err(e) = parse_cpu_list(&text, &topo, min) {
            let e = e.0;
            prop_assert!(
                e.starts_with(&format!("--cpus {text}: ")) || e.starts_with("--cpus '': "),
                "{e}"
            );
            prop_assert!(has_fix(&e), "no fix in: {e}");
        }
    }

    #[test]
    fn durations_parse_to_the_exact_value(
        (unit, scale, n) in prop::sample::select(DURATION_UNITS.to_vec())
            .prop_flat_map(|(u, s)| (Just(u), Just(s), 0..=1_000_000_000_000_000u64 / s)),
        (lead, mid, trail) in (spaces(), spaces(), spaces()),
    ) {
        let text = format!("{lead}{n}{mid}{unit}{trail}");
        prop_assert_eq!(parse_duration(&text), Ok(n * scale), "{:?}", text);
    }

    #[test]
    fn decimal_durations_round_to_the_nearest_nanosecond(
        (unit, scale, whole) in prop::sample::select(DURATION_UNITS[1..].to_vec())
            .prop_flat_map(|(u, s)| (Just(u), Just(s), 0..=1_000_000_000_000u64 / s)),
        frac in 0u64..1000,
    ) {
        let text = format!("{whole}.{frac:03}{unit}");
        // scale is a multiple of 1000 here, so the exact value is an integer.
        prop_assert_eq!(parse_duration(&text), Ok(whole * scale + frac * (scale / 1000)), "{}", text);
    }

    #[test]
    fn sizes_parse_to_the_exact_value(
        (unit, mult, n) in prop::sample::select(SIZE_UNITS.to_vec()).prop_flat_map(|(u, m)| {
            (Just(u), Just(m), 4096u64.div_ceil(m)..=(1u64 << 30) / m)
        }),
        (lead, trail) in (spaces(), spaces()),
    ) {
        let text = format!("{lead}{n}{unit}{trail}");
        prop_assert_eq!(parse_size(&text), Ok(n * mult), "{:?}", text);
    }

    #[test]
    fn sizes_outside_the_ring_buffer_range_are_refused(
        (unit, mult) in prop::sample::select(SIZE_UNITS.to_vec()),
        n in prop_oneof![0u64..4096, (1u64 << 30) + 1..=u64::MAX],
    ) {
        let text = format!("{n}{unit}");
        let bytes = n.checked_mul(mult);
        if bytes.is_some_and(|b| (4096..=1 << 30).contains(&b)) {
            return Ok(());
        }
        let e = parse_size(&text).unwrap_err();
        prop_assert!(e.contains("below one page (4K)") || e.contains("above 1G"), "{text}: {e}");
    }

    #[test]
    fn rates_parse_to_the_exact_value(n in 1u32..=10_000, per_s in any::<bool>(), pad in spaces()) {
        let text = format!("{pad}{n}{}", if per_s { "/s" } else { "" });
        prop_assert_eq!(parse_rate(&text), Ok(n));
    }

    #[test]
    fn rates_outside_the_range_name_it(n in prop_oneof![Just(0u32), 10_001u32..]) {
        let e = parse_rate(&n.to_string()).unwrap_err();
        prop_assert!(e.contains(&format!("{n} per second is outside 1 to 10000")), "{e}");
    }

    #[test]
    fn noise_specs_parse_to_the_exact_value(
        kind in prop::sample::select(vec![
            ("kworker", NoiseKind::Kworker), ("KWorker", NoiseKind::Kworker),
            ("irq", NoiseKind::Irq), ("IRQ", NoiseKind::Irq), ("task", NoiseKind::Task),
            ("timer", NoiseKind::Timer), ("freq", NoiseKind::Freq), ("Freq", NoiseKind::Freq),
        ]),
        cpu in any::<u32>(),
        rate in 1u32..=10_000,
        per_s in any::<bool>(),
        bad_rate in prop_oneof![Just(0u32), 10_001u32..],
    ) {
        let suffix = if per_s { "/s" } else { "" };
        let text = format!("{}@{cpu}:{rate}{suffix}", kind.0);
        prop_assert_eq!(parse_spec(&text), Ok((kind.1, cpu, rate)));
        let text = format!("{}@{cpu}:{bad_rate}", kind.0);
        let e = parse_spec(&text).unwrap_err();
        prop_assert!(e.starts_with(&format!("--inject {text}: ")), "{e}");
        prop_assert!(e.contains("outside 1 to 10000"), "{e}");
    }

    #[test]
    fn cpu_lists_parse_back_in_order(
        topo in topology(),
        keys in prop::collection::vec(any::<u32>(), 48),
        (cut, take) in (any::<Index>(), any::<Index>()),
        merges in prop::collection::vec(any::<bool>(), 48),
        pads in prop::collection::vec(spaces(), 48),
        min in 1usize..3,
    ) {
        // The usable CPUs in a random order, with a sorted stretch so that ranges occur.
        let mut order: Vec<u32> = topo.allowed.clone();
        order.sort_by_key(|&c| keys[c as usize]);
        let cut = cut.index(order.len() + 1);
        order[..cut].sort_unstable();
        let chosen: Vec<u32> = order[..take.index(order.len() + 1)].to_vec();
        // Consecutive ascending CPUs are written as a range where `merges` says so.
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < chosen.len() {
            let mut j = i;
            while j + 1 < chosen.len() && chosen[j + 1] == chosen[j] + 1 && merges[j] {
                j += 1;
            }
            let pad = pads[i];
            parts.push(if i == j {
                format!("{pad}{}{pad}", chosen[i])
            } else {
                format!("{pad}{}-{}", chosen[i], chosen[j])
            });
            i = j + 1;
        }
        let text = parts.join(",");
        let got = parse_cpu_list(&text, &topo, min);
        if chosen.len() >= min.max(1) {
            prop_assert_eq!(got.map_err(|e| e.0), Ok(chosen), "{:?}", text);
        } else {
            let e = got.unwrap_err().0;
            prop_assert!(e.starts_with("--cpus "), "{e}");
            prop_assert!(has_fix(&e), "{e}");
        }
    }

    #[test]
    fn cpu_list_errors_name_the_cpu(topo in topology(), pick in any::<Index>(), far in 48u32..) {
        let absent: Vec<u32> = topo.present.iter().copied()
            .filter(|c| !topo.online.contains(c)).collect();
        let excluded: Vec<u32> = topo.online.iter().copied()
            .filter(|c| !topo.allowed.contains(c)).collect();
        let base = topo.allowed.first().copied();
        let Some(base) = base else { return Ok(()) };
        let e = |text: &str| parse_cpu_list(text, &topo, 1).unwrap_err().0;

        let msg = e(&format!("{base},{far}"));
        prop_assert!(msg.contains(&format!("CPU {far} does not exist")), "{msg}");
        // A range reaching past the machine is refused by the CPU that does not exist,
        // without expanding billions of numbers first.
        let msg = e(&format!("{base}-{far}"));
        prop_assert!(msg.contains("does not exist; this machine has CPUs"), "{msg}");
        if !absent.is_empty() {
            let c = absent[pick.index(absent.len())];
            let msg = e(&format!("{c}"));
            prop_assert!(msg.contains(&format!("CPU {c} is offline")), "{msg}");
            prop_assert!(msg.contains(&format!("/sys/devices/system/cpu/cpu{c}/online")), "{msg}");
        }
        if !excluded.is_empty() {
            let c = excluded[pick.index(excluded.len())];
            let msg = e(&format!("{c}"));
            prop_assert!(msg.contains(&format!("CPU {c} is not in this process's allowed CPUs")), "{msg}");
        }
        let msg = e(&format!("{base},{base}"));
        prop_assert!(msg.contains(&format!("CPU {base} is given twice")), "{msg}");
    }
}

proptest! {
    #![proptest_config(config(1_500))]

    /// Through clap, as a user meets them: an invalid value's error names the flag and the
    /// value, and says how to fix it; a valid one lands in the field unchanged.
    #[test]
    fn flag_errors_name_the_flag_the_value_and_a_fix(text in typed_text()) {
        for flag in [
            "--interval", "--duration", "--warmup", "--stall-threshold", "--spike-threshold",
            "--ringbuf-size", "--inject",
        ] {
            let arg = format!("{flag}={text}");
            match clap_error(&[&arg]) {
                Some(e) => {
                    prop_assert!(e.contains(flag), "{arg}: {e}");
                    prop_assert!(e.contains(&format!("'{text}'")), "{arg}: {e}");
                    prop_assert!(has_fix(&e), "{arg}: no fix in: {e}");
                }
                None => {
                    let Cli { run, .. } = Cli::try_parse_from(["jitterscope", &arg]).unwrap();
                    if flag == "--duration" {
                        prop_assert_eq!(Ok(run.duration), parse_duration(&text));
                    }
                    if flag == "--ringbuf-size" {
                        prop_assert_eq!(Ok(run.session.ringbuf_size), parse_size(&text).map(Some));
                    }
                }
            }
        }
        let arg = format!("--rate={text}");
        if let Some(e) = clap_error(&["noise", "--cpu", "1", "--kind", "irq", &arg]) {
            prop_assert!(e.contains("--rate") && e.contains(&format!("'{text}'")), "{e}");
            prop_assert!(has_fix(&e), "no fix in: {e}");
        }
    }

    #[test]
    fn bounded_durations_accept_their_whole_range(
        (flag, lo, hi) in prop::sample::select(vec![
            ("--interval", 100u64, 1_000_000_000u64),
            ("--duration", 1_000_000, 7 * 24 * 3_600_000_000_000),
            ("--warmup", 0, 3_600_000_000_000),
            ("--spike-threshold", 100, 10_000_000_000),
            ("--stall-threshold", 100, 1_000_000_000),
        ]),
        pick in any::<Index>(),
        outside in any::<Index>(),
    ) {
        let ns = lo + pick.index((hi - lo) as usize + 1) as u64;
        let arg = format!("{flag}={ns}ns");
        let Cli { run, .. } = Cli::try_parse_from(["jitterscope", &arg])
            .map_err(|e| TestCaseError::fail(format!("{arg}: {e}")))?;
        let got = match flag {
            "--interval" => run.interval,
            "--duration" => run.duration,
            "--warmup" => run.warmup,
            "--spike-threshold" => run.spike_threshold,
            _ => match run.stall_threshold {
                cli::Threshold::Fixed(ns) => ns,
                cli::Threshold::Auto => u64::MAX,
            },
        };
        prop_assert_eq!(got, ns);
        // Just outside either end is refused with the bound named.
        let below = lo.saturating_sub(1 + outside.index(lo.max(1) as usize) as u64);
        if lo > 0 {
            let e = clap_error(&[&format!("{flag}={below}ns")]).unwrap();
            prop_assert!(e.contains("the smallest") || e.contains("zero is not"), "{e}");
        }
        let above = hi + 1 + outside.index(1 << 40) as u64;
        let e = clap_error(&[&format!("{flag}={above}ns")]).unwrap();
        prop_assert!(e.contains("above the largest"), "{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// The run file
// ---------------------------------------------------------------------------------------------

/// Strings as a run file may carry them: names, empty, any unicode, rarely huge.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9_/:\\[\\] .-]{0,12}",
        2 => Just(String::new()),
        2 => any::<String>(),
        1 => "[|`<>&\"\\\\\n]{0,4}",
        1 => (1usize..50_000).prop_map(|n| "x|<".repeat(n)),
    ]
}

fn class_name() -> impl Strategy<Value = CulpritClass> {
    prop::sample::select(CulpritClass::ALL.to_vec())
}

fn ns() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..2_000_000,
        2 => any::<u64>(),
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
    ]
}

fn cpu() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..8, 1 => any::<u32>(), 1 => Just(u32::MAX)]
}

/// Finite floats only: JSON has no NaN or infinity.
fn float() -> impl Strategy<Value = f64> {
    use prop::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    prop_oneof![
        3 => 0.0..=1.0f64,
        2 => NORMAL | SUBNORMAL | ZERO | POSITIVE | NEGATIVE,
        1 => Just(f64::MAX),
        1 => Just(f64::MIN),
        1 => Just(-0.0),
    ]
}

fn small_vec<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec(s, 0..4)
}

prop_compose! {
    fn summary()(
        count in ns(), min in ns(), mean in float(), max in ns(),
        percentiles in prop::collection::btree_map(
            prop_oneof![
                4 => prop::sample::select(PERCENTILES.iter().map(|p| p.0.to_string()).collect::<Vec<_>>()),
                1 => text(),
            ],
            ns(),
            0..9,
        ),
        curve in prop::collection::vec((float(), ns()), 0..8),
    ) -> Summary {
        Summary { count, min, mean, max, percentiles, curve }
    }
}

prop_compose! {
    fn interruption()(
        cpu in cpu(), class in prop::sample::select(CulpritClass::ALL.to_vec()),
        start_ns in ns(), end_ns in ns(), id in any::<u64>(), name in text(), detail in text(),
        pid in any::<u32>(),
        parent in prop::option::of(prop::sample::select(CulpritClass::ALL.to_vec())),
    ) -> TimelineRecord {
        TimelineRecord { cpu, class, start_ns, end_ns, id, name, detail, pid, parent, victim: 0 }
    }
}

prop_compose! {
    fn stall_culprit()(
        class in class_name(), name in text(), detail in text(), via in text(),
        measured_ns in ns(), inferred_ns in ns(), host_ns in ns(), episodes in ns(),
        share in float(),
    ) -> StallCulprit {
        StallCulprit {
            class, name, detail, via, measured_ns, inferred_ns, host_ns, episodes, share,
            container: None,
        }
    }
}

prop_compose! {
    fn stall()(
        cpu in cpu(), thread in text(), start_ns in ns(), end_ns in ns(), duration_ns in ns(),
        explained_share in prop::option::of(float()), culprits in small_vec(stall_culprit()),
        incomplete in any::<bool>(), timeline in small_vec(interruption()),
    ) -> StallEntry {
        StallEntry {
            cpu, thread, start_ns, end_ns, duration_ns, explained_share, culprits, incomplete,
            timeline,
        }
    }
}

prop_compose! {
    fn spike()(
        consumer in text(), producer_cpu in cpu(), consumer_cpu in cpu(), publish_ns in ns(),
        receive_ns in ns(), transit_ns in ns(), producer_stalled_ns in ns(),
        consumer_stalled_ns in ns(), producer_culprits in small_vec(stall_culprit()),
        consumer_culprits in small_vec(stall_culprit()),
    ) -> SpikeEntry {
        SpikeEntry {
            consumer, producer_cpu, consumer_cpu, publish_ns, receive_ns, transit_ns,
            producer_stalled_ns, consumer_stalled_ns, producer_culprits, consumer_culprits,
        }
    }
}

fn cpu_count() -> impl Strategy<Value = CpuCount> {
    (cpu(), ns()).prop_map(|(cpu, count)| CpuCount { cpu, count })
}

fn cpu_theft() -> impl Strategy<Value = CpuTheftEntry> {
    (cpu(), ns(), ns(), ns(), ns()).prop_map(
        |(cpu, measured_ns, inferred_ns, host_ns, episodes)| CpuTheftEntry {
            cpu,
            measured_ns,
            inferred_ns,
            host_ns,
            episodes,
        },
    )
}

prop_compose! {
    fn culprit()(
        class in class_name(), name in text(), detail in text(), episodes in ns(),
        measured_ns in ns(), inferred_ns in ns(), host_ns in ns(), longest_ns in ns(),
        share in float(), advice in text(), cpus in small_vec(cpu_theft()),
        vector in prop::option::of(text()), processes in prop::option::of(processes()),
    ) -> CulpritEntry {
        CulpritEntry {
            class, name, detail, episodes, measured_ns, inferred_ns, host_ns, longest_ns, share,
            advice, cpus, vector, processes, who: None,
        }
    }
}

fn processes() -> impl Strategy<Value = ProcessesEntry> {
    let each = (any::<u32>(), ns(), ns(), ns(), ns()).prop_map(
        |(pid, episodes, measured_ns, inferred_ns, longest_ns)| ProcessEntry {
            pid,
            episodes,
            measured_ns,
            inferred_ns,
            longest_ns,
        },
    );
    (ns(), any::<bool>(), small_vec(each), ns()).prop_map(|(count, more, listed, not_listed)| {
        ProcessesEntry {
            count,
            more,
            listed,
            not_listed,
        }
    })
}

prop_compose! {
    fn probe_info()(
        unavailable in small_vec(text()), events in small_vec(cpu_count()),
        drops in small_vec(cpu_count()),
        costs in small_vec((text(), ns(), ns()).prop_map(|(program, run_count, run_time_ns)| {
            ProgramCostEntry { program, run_count, run_time_ns }
        })),
        incomplete_stalls in ns(), stats_enabled in any::<bool>(), symbols in any::<bool>(),
        steal_clock in any::<bool>(), steal_note in text(),
        steal in small_vec((cpu(), ns()).prop_map(|(cpu, steal_ns)| CpuSteal { cpu, steal_ns })),
    ) -> ProbeInfo {
        ProbeInfo {
            unavailable, events, drops, costs, incomplete_stalls, stats_enabled, symbols,
            steal_clock, steal_note, steal,
        }
    }
}

prop_compose! {
    fn settings()(
        pinned in any::<bool>(), interval_ns in ns(), warmup_ns in ns(),
        planned_duration_ns in ns(), stall_threshold_ns in ns(), spike_threshold_ns in ns(),
        stall_threshold_auto in any::<bool>(), probes in any::<bool>(),
        consumer_fifo in prop::option::of(1u8..=99),
    ) -> Settings {
        Settings {
            pinned, interval_ns, warmup_ns, planned_duration_ns, stall_threshold_ns,
            spike_threshold_ns, stall_threshold_auto, probes, consumer_fifo,
        }
    }
}

prop_compose! {
    fn run_info()(
        label in text(), cpus in small_vec(cpu()), producer_cpu in cpu(),
        consumer_cpus in small_vec(cpu()), start_unix_ns in ns(), record_from_ns in ns(),
        duration_ns in ns(), kernel in text(), host in text(),
        ended in prop::sample::select(vec![Ended::Completed, Ended::Interrupted, Ended::CpuLost]),
        end_reason in text(),
        settings in settings(),
        floor in prop::option::of((cpu(), cpu(), ns(), ns(), ns(), ns()).prop_map(
            |(from_cpu, to_cpu, min_ns, p50_ns, p99_ns, rounds)| Floor {
                from_cpu, to_cpu, min_ns, p50_ns, p99_ns, rounds,
            },
        )),
    ) -> RunInfo {
        RunInfo {
            label, cpus, producer_cpu, consumer_cpus, start_unix_ns, record_from_ns,
            duration_ns, kernel, host, ended, end_reason, settings, floor,
        }
    }
}

prop_compose! {
    fn stall_summary()(
        count in ns(), total_ns in ns(), longest_ns in ns(),
        per_cpu in small_vec((cpu(), ns(), ns(), ns()).prop_map(|(cpu, count, total_ns, longest_ns)| {
            CpuStalls { cpu, count, total_ns, longest_ns }
        })),
    ) -> StallSummary {
        StallSummary { count, total_ns, longest_ns, per_cpu }
    }
}

prop_compose! {
    fn run_file()(
        run in run_info(),
        histograms in small_vec((
            prop_oneof![
                3 => prop::sample::select(vec!["accumulator", "journaller"]).prop_map(String::from),
                1 => text(),
            ],
            cpu(), summary(), summary(),
        ).prop_map(|(consumer, cpu, transit, inter_message)| {
            ConsumerHistograms { consumer, cpu, transit, inter_message }
        })),
        stall_summary in stall_summary(), stalls in small_vec(stall()),
        culprits in small_vec(culprit()), spike_count in ns(), spikes in small_vec(spike()),
        lost in (ns(), ns(), ns(), ns()).prop_map(|(a, b, c, d)| Lost {
            ring_buffer_drops: a, workload_queue_drops: b, sequence_errors: c,
            threads_not_watched: d,
        }),
        probes in prop::option::of(probe_info()),
        overhead in prop::option::of((ns(), ns(), ns(), ns()).prop_map(
            |(window_ns, tracer_cpu_ns, bpf_run_ns, bpf_events)| Overhead {
                window_ns, tracer_cpu_ns, bpf_run_ns, bpf_events, longest_self: Vec::new(),
                collector_budget: (bpf_events % 2 == 0).then_some(0.02), held_back: window_ns % 7,
                after_cpu_ns: bpf_run_ns / 3, at_end: tracer_cpu_ns % 2 == 0,
                decided_in_run: bpf_events / 5, files_cpu_ns: tracer_cpu_ns / 7,
            },
        )),
        config in prop::option::of((text(), small_vec(cpu())).prop_map(|(cmdline, cpus)| {
            jitterscope::system::config::Configured {
                cmdline,
                nohz_full: Some(cpus.clone()),
                workqueue_cpumask: Some(cpus),
                ..Default::default()
            }
        })),
    ) -> RunFile {
        RunFile {
            schema: SCHEMA.to_string(), run, histograms, stall_summary, stalls, culprits,
            mode: jitterscope::report::runfile::Mode::Run,
            watch: None,
            threads: Vec::new(),
            spike_count, spikes, lost, probes, overhead, config,
        }
    }
}

/// A run file as a real run writes it (the unit tests' sample, grown a little).
fn sample_json() -> String {
    let summary = Summary {
        count: 3,
        min: 10,
        mean: 20.5,
        max: 40,
        percentiles: PERCENTILES
            .iter()
            .enumerate()
            .map(|(i, p)| (p.0.to_string(), 20 + i as u64))
            .collect(),
        curve: vec![(0.0, 10), (0.5, 20), (1.0, 40)],
    };
    let culprit = StallCulprit {
        class: CulpritClass::Kworker,
        name: "kworker/3:1".into(),
        detail: "vmstat_update".into(),
        via: "queued by cpu 0".into(),
        measured_ns: 2,
        inferred_ns: 1,
        host_ns: 0,
        episodes: 1,
        share: 0.75,
        container: None,
    };
    RunFile {
        schema: SCHEMA.into(),
        mode: jitterscope::report::runfile::Mode::Run,
        watch: None,
        threads: Vec::new(),
        run: RunInfo {
            label: "x".into(),
            cpus: vec![1, 3],
            producer_cpu: 1,
            consumer_cpus: vec![3],
            start_unix_ns: 1,
            record_from_ns: 2,
            duration_ns: 2_000_000,
            kernel: "6.8".into(),
            host: "h".into(),
            ended: Ended::Completed,
            end_reason: String::new(),
            settings: Settings {
                pinned: true,
                interval_ns: 10_000,
                warmup_ns: 0,
                planned_duration_ns: 2_000_000,
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
            count: 1,
            total_ns: 4,
            longest_ns: 4,
            per_cpu: vec![CpuStalls {
                cpu: 3,
                count: 1,
                total_ns: 4,
                longest_ns: 4,
            }],
        },
        stalls: vec![StallEntry {
            cpu: 3,
            thread: "accumulator".into(),
            start_ns: 5,
            end_ns: 9,
            duration_ns: 4,
            explained_share: Some(0.75),
            culprits: vec![culprit.clone()],
            incomplete: true,
            timeline: vec![TimelineRecord {
                cpu: 3,
                class: CulpritClass::Kworker,
                start_ns: 5,
                end_ns: 8,
                id: 77,
                name: "kworker/3:1".into(),
                detail: "vmstat_update".into(),
                pid: 77,
                parent: Some(CulpritClass::Irq),
                victim: 0,
            }],
        }],
        culprits: vec![CulpritEntry {
            class: CulpritClass::Kworker,
            name: "kworker/3:1".into(),
            detail: "vmstat_update".into(),
            episodes: 1,
            measured_ns: 2,
            inferred_ns: 1,
            host_ns: 0,
            longest_ns: 3,
            share: 0.75,
            advice: "tune --kworkers".into(),
            cpus: vec![CpuTheftEntry {
                cpu: 3,
                measured_ns: 2,
                inferred_ns: 1,
                host_ns: 0,
                episodes: 1,
            }],
            vector: None,
            processes: None,
            who: None,
        }],
        spike_count: 1,
        spikes: vec![SpikeEntry {
            consumer: "accumulator".into(),
            producer_cpu: 1,
            consumer_cpu: 3,
            publish_ns: 4,
            receive_ns: 20,
            transit_ns: 16,
            producer_stalled_ns: 0,
            consumer_stalled_ns: 4,
            producer_culprits: vec![culprit.clone()],
            consumer_culprits: vec![culprit],
        }],
        lost: Lost {
            ring_buffer_drops: 1,
            workload_queue_drops: 2,
            sequence_errors: 3,
            threads_not_watched: 0,
        },
        probes: Some(ProbeInfo {
            unavailable: vec!["tp_btf/ipi_send_cpu".into()],
            events: vec![CpuCount { cpu: 3, count: 10 }],
            drops: vec![CpuCount { cpu: 3, count: 1 }],
            costs: vec![ProgramCostEntry {
                program: "sched_switch".into(),
                run_count: 10,
                run_time_ns: 1_750,
            }],
            incomplete_stalls: 1,
            stats_enabled: true,
            symbols: true,
            steal_clock: true,
            steal_note: String::new(),
            steal: vec![CpuSteal {
                cpu: 3,
                steal_ns: 5,
            }],
        }),
        overhead: Some(Overhead {
            window_ns: 2_000_000,
            tracer_cpu_ns: 40_000,
            bpf_run_ns: 1_750,
            bpf_events: 10,
            longest_self: Vec::new(),
            collector_budget: Some(0.02),
            held_back: 0,
            after_cpu_ns: 0,
            at_end: false,
            decided_in_run: 0,
            files_cpu_ns: 0,
        }),
        config: None,
    }
    .to_json()
}

const PATH: &str = "runs/ünï code [1].json";

/// Every format and the comparison of two runs: none may panic, and each output has the
/// shape its consumers rely on.
fn render_everything(a: &RunFile, b: &RunFile) -> Result<(), TestCaseError> {
    for e in export::all() {
        let out = e.render(a);
        match e.name() {
            "json" => prop_assert_eq!(&RunFile::from_json(PATH, &out).unwrap(), a),
            "svg" => prop_assert!(out.starts_with("<svg") && out.ends_with("</svg>\n")),
            "perfetto" => {
                let v: serde_json::Value = serde_json::from_str(&out)
                    .map_err(|e| TestCaseError::fail(format!("perfetto output: {e}")))?;
                prop_assert!(v["traceEvents"].is_array());
            }
            "markdown" => prop_assert!(out.starts_with("# jitterscope run `")),
            _ => prop_assert!(!out.is_empty()),
        }
    }
    let runs = [
        ("a.json".to_string(), a.clone()),
        ("b.json".to_string(), b.clone()),
    ];
    let text = compare::render(&runs);
    prop_assert!(text.starts_with("# jitterscope compare\n"));
    let svg = compare::chart(&runs);
    prop_assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    Ok(())
}

/// A failed read: the message starts with what was done and names the file.
fn check_error(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = RunFile::from_json(PATH, text) {
        let msg = e.to_string();
        prop_assert!(
            msg.starts_with(&format!("cannot read run file {PATH}: ")),
            "{msg}"
        );
    }
    Ok(())
}

/// One change to a run file's text, as a disk, an editor or another program makes them.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(Index),
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    /// Replace the n-th number with other JSON.
    Number(Index, &'static str),
    /// Remove the n-th key of any object.
    DropKey(Index),
    /// Replace the n-th value of any kind with an arbitrary one.
    Value(Index, serde_json::Value),
}

const NUMBER_REPLACEMENTS: [&str; 14] = [
    "-1",
    "-0",
    "0",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "1e400",
    "1.5",
    "4294967296",
    "null",
    "\"7\"",
    "true",
    "[]",
    "{}",
];

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        3 => prop::sample::select(vec![
                            "schema", "run", "histograms", "stalls", "culprits", "lost",
                            "probes", "label", "cpus", "settings", "transit", "curve",
                            "percentiles", "timeline", "class", "parent", "count",
                        ]).prop_map(String::from),
                        1 => text(),
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), 1u8..).prop_map(|(i, b)| Mutation::Flip(i, b)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<Index>().prop_map(Mutation::Delete),
        4 => (any::<Index>(), prop::sample::select(NUMBER_REPLACEMENTS.to_vec()))
            .prop_map(|(i, r)| Mutation::Number(i, r)),
        3 => any::<Index>().prop_map(Mutation::DropKey),
        2 => (any::<Index>(), json_value()).prop_map(|(i, v)| Mutation::Value(i, v)),
    ]
}

/// Byte ranges of the number tokens outside strings.
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let (mut spans, mut i, mut in_string) = (Vec::new(), 0, false);
    while i < b.len() {
        match b[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            c if !in_string && (c == b'-' || c.is_ascii_digit()) => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                spans.push((start, i));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    spans
}

/// The n-th value of the tree, depth first, counting down `n` on the way.
fn nth_value<'a>(v: &'a mut serde_json::Value, n: &mut usize) -> Option<&'a mut serde_json::Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        serde_json::Value::Array(a) => a.iter_mut().find_map(|x| nth_value(x, n)),
        serde_json::Value::Object(o) => o.values_mut().find_map(|x| nth_value(x, n)),
        _ => None,
    }
}

fn count_values(v: &serde_json::Value) -> usize {
    1 + match v {
        serde_json::Value::Array(a) => a.iter().map(count_values).sum(),
        serde_json::Value::Object(o) => o.values().map(count_values).sum(),
        _ => 0,
    }
}

fn count_keys(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(a) => a.iter().map(count_keys).sum(),
        serde_json::Value::Object(o) => o.len() + o.values().map(count_keys).sum::<usize>(),
        _ => 0,
    }
}

/// Removes the n-th key of the tree (keys of an object before those of its children).
fn drop_nth_key(v: &mut serde_json::Value, n: &mut usize) -> bool {
    match v {
        serde_json::Value::Array(a) => a.iter_mut().any(|x| drop_nth_key(x, n)),
        serde_json::Value::Object(o) => {
            if *n < o.len() {
                let key = o.keys().nth(*n).cloned();
                key.is_some_and(|k| o.remove(&k).is_some())
            } else {
                *n -= o.len();
                o.values_mut().any(|x| drop_nth_key(x, n))
            }
        }
        _ => false,
    }
}

fn apply(text: String, m: &Mutation) -> String {
    let mut bytes = text.into_bytes();
    match m {
        Mutation::Truncate(i) => bytes.truncate(i.index(bytes.len() + 1)),
        Mutation::Flip(i, x) if !bytes.is_empty() => {
            let i = i.index(bytes.len());
            bytes[i] ^= x;
        }
        Mutation::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), *b),
        Mutation::Delete(i) if !bytes.is_empty() => {
            bytes.remove(i.index(bytes.len()));
        }
        Mutation::Number(i, r) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let spans = number_spans(&text);
            if spans.is_empty() {
                return text;
            }
            let (a, b) = spans[i.index(spans.len())];
            return format!("{}{r}{}", &text[..a], &text[b..]);
        }
        Mutation::DropKey(i) | Mutation::Value(i, _) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else {
                return text;
            };
            match m {
                Mutation::Value(_, new) => {
                    let mut n = i.index(count_values(&v));
                    if let Some(x) = nth_value(&mut v, &mut n) {
                        *x = new.clone();
                    }
                }
                _ => {
                    let keys = count_keys(&v);
                    if keys > 0 {
                        drop_nth_key(&mut v, &mut i.index(keys));
                    }
                }
            }
            return serde_json::to_string_pretty(&v).unwrap();
        }
        _ => {}
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(config(1_000))]

    #[test]
    fn generated_run_files_round_trip_and_render(a in run_file(), b in run_file()) {
        let json = a.to_json();
        prop_assert_eq!(&RunFile::from_json(PATH, &json).unwrap(), &a);
        render_everything(&a, &b)?;
    }

    #[test]
    fn mutated_run_files_never_panic(
        generated in prop::option::weighted(0.5, run_file()),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let valid = generated.map_or_else(sample_json, |r| r.to_json());
        let text = mutations.iter().fold(valid, apply);
        check_error(&text)?;
        if let Ok(run) = RunFile::from_json(PATH, &text) {
            let reference = RunFile::from_json(PATH, &sample_json()).unwrap();
            render_everything(&run, &reference)?;
            render_everything(&reference, &run)?;
        }
    }
}

proptest! {
    #![proptest_config(config(3_000))]

    #[test]
    fn arbitrary_text_never_panics(text in prop_oneof![
        any::<String>(),
        "[\\[\\]{}\":,0-9a-z. \n-]{0,64}",
        json_value().prop_map(|v| v.to_string()),
    ]) {
        check_error(&text)?;
        if let Ok(run) = RunFile::from_json(PATH, &text) {
            render_everything(&run, &run)?;
        }
    }

    /// Arbitrary JSON under the right schema: gets past the schema check to the typed parse.
    #[test]
    fn arbitrary_json_under_the_schema_never_panics(
        fields in prop::collection::btree_map(
            prop::sample::select(vec![
                "run", "histograms", "stall_summary", "stalls", "culprits", "spike_count",
                "spikes", "lost", "probes",
            ]),
            json_value(),
            0..9,
        ),
    ) {
        let mut v = serde_json::from_str::<serde_json::Value>(&sample_json()).unwrap();
        for (k, x) in fields {
            v[k] = x;
        }
        let text = v.to_string();
        check_error(&text)?;
        if let Ok(run) = RunFile::from_json(PATH, &text) {
            render_everything(&run, &run)?;
        }
    }
}

/// The reader's messages per failure, and that each names the path.
#[test]
fn read_errors_say_what_went_wrong() {
    let e = |text: &str| RunFile::from_json(PATH, text).unwrap_err().to_string();
    assert!(e("").contains("it is empty"));
    assert!(e(" \n").contains("it is empty"));
    assert!(e("{").contains("the file is truncated"));
    assert!(e("[1]").contains("not a jitterscope run file (the text is not a JSON object)"));
    assert!(e(&format!("[\"{SCHEMA}\"]")).contains("not a JSON object"));
    assert!(e("{}").contains("no \"schema\" key"));
    assert!(e(r#"{"schema": 7}"#).contains("schema is \"7\""));
    let json = sample_json();
    assert!(e(&json.replace(SCHEMA, "jitterscope.run/0")).contains("jitterscope.run/0"));
    let cut = &json[..json.len() - 3];
    assert!(e(cut).contains("truncated"));
    let negative = json.replacen("\"count\": 3", "\"count\": -3", 1);
    assert!(
        e(&negative).contains("unexpected content"),
        "{}",
        e(&negative)
    );
}

/// The fuzz target's seeds (tests/fuzz/seeds/run_file/) are kept current like golden files:
/// `UPDATE_GOLDEN=1 cargo test --release --test props fuzz_seeds` rewrites them and fails, saying so (run again without it).
#[test]
fn fuzz_seeds_are_current() {
    let valid = sample_json();
    // A run without probes, written before the optional keys existed: serde's defaults.
    let mut old: serde_json::Value = serde_json::from_str(&valid).unwrap();
    for key in ["spike_count", "spikes", "probes"] {
        old.as_object_mut().unwrap().remove(key);
    }
    old["run"]["settings"]["probes"] = false.into();
    old["run"].as_object_mut().unwrap().remove("record_from_ns");
    old["stalls"] = serde_json::json!([]);
    old["culprits"] = serde_json::json!([]);
    let old = serde_json::to_string_pretty(&old).unwrap();
    // Every figure at its type's maximum and every list doubled: sums that overflow and CPU
    // numbers that overflow derived ids are a mutation or two away.
    let mut extreme: serde_json::Value = serde_json::from_str(&valid).unwrap();
    maximise(&mut extreme, "");
    let extreme = serde_json::to_string_pretty(&extreme).unwrap();
    let seeds = [
        ("valid_extreme.json", extreme),
        ("valid.json", valid.clone()),
        ("valid_no_probes.json", old),
        ("truncated.json", valid[..valid.len() / 2].to_string()),
        (
            "other_schema.json",
            valid.replace(SCHEMA, "jitterscope.run/3"),
        ),
        // A file of the first schema, as that version wrote it: still read.
        (
            "valid_v1.json",
            include_str!("golden/run_v1.json").to_string(),
        ),
        (
            "not_a_run_file.json",
            "{\"traceEvents\": [], \"displayTimeUnit\": \"ns\"}\n".to_string(),
        ),
    ];
    let dir = format!("{}/tests/fuzz/seeds/run_file", env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for (name, text) in &seeds {
        let path = format!("{dir}/{name}");
        if update {
            std::fs::write(&path, text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("missing seed {path}: {e} (UPDATE_GOLDEN=1 writes it)"));
        assert_eq!(
            &on_disk, text,
            "{path} is stale (UPDATE_GOLDEN=1 rewrites it)"
        );
        let read = RunFile::from_json(name, text);
        assert_eq!(read.is_ok(), name.starts_with("valid"), "{name}: {read:?}");
    }
    assert!(
        !update,
        "UPDATE_GOLDEN is set: rewrote the seeds in {dir}; check them (git diff), then run again without UPDATE_GOLDEN"
    );
}

/// Sets every number to its field's maximum (u32 for CPUs and pids, u64 or f64 otherwise) and
/// repeats the first element of every array of objects.
fn maximise(v: &mut serde_json::Value, key: &str) {
    use serde_json::Value;
    match v {
        Value::Number(n) => {
            *v = if [
                "cpu",
                "producer_cpu",
                "consumer_cpu",
                "cpus",
                "consumer_cpus",
                "from_cpu",
                "to_cpu",
                "pid",
            ]
            .contains(&key)
            {
                u32::MAX.into()
            } else if n.is_f64() {
                f64::MAX.into()
            } else {
                u64::MAX.into()
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first().filter(|x| x.is_object()).cloned() {
                a.push(first);
            }
            a.iter_mut().for_each(|x| maximise(x, key));
        }
        Value::Object(o) => o.iter_mut().for_each(|(k, x)| maximise(x, k)),
        _ => {}
    }
}
