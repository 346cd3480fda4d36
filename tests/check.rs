//! `check`'s verdicts for what this machine cannot boot with: the configured half read from a
//! fake root (`/proc/cmdline`, sysfs and cgroup files in a temporary directory), held against
//! observations made up for the test — each verdict, including "configured but not
//! effective"; and the JSON form against its documented schema (docs/check.schema.json).

use std::path::Path;

use jitterscope::check::judge::{Checked, Counted, Finding, Judge, Verdict};
use jitterscope::check::observe::{CpuSeen, Promise, Seen};
use jitterscope::model::{CulpritClass, TickDependency, TickStops, TimerCallback, Who};
use jitterscope::report::advice::{Machine, Tracer};
use jitterscope::system::config::{Configured, Root};

/// A fake root: each `(path, content)` written under a temporary directory.
fn fake_root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    dir
}

/// A 4-CPU KVM guest with no isolation, plus `extra` files (later ones win).
fn machine_files<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = vec![
        ("/proc/sys/kernel/osrelease", "6.18.0\n"),
        ("/proc/cmdline", "root=/dev/vda ro\n"),
        ("/sys/devices/system/cpu/online", "0-3\n"),
        ("/sys/devices/system/cpu/present", "0-3\n"),
        ("/sys/devices/system/cpu/isolated", "\n"),
        ("/sys/devices/system/cpu/nohz_full", "(null)\n"),
        ("/sys/devices/virtual/workqueue/cpumask", "f\n"),
        ("/proc/sys/vm/stat_interval", "1\n"),
        ("/proc/sys/kernel/timer_migration", "1\n"),
        ("/proc/sys/kernel/sched_rt_runtime_us", "950000\n"),
        ("/proc/sys/kernel/sched_rt_period_us", "1000000\n"),
        (
            "/proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu hypervisor\n",
        ),
        (
            "/boot/config-6.18.0",
            "CONFIG_NO_HZ_FULL=y\nCONFIG_HZ=250\n",
        ),
    ];
    for e in extra {
        v.retain(|(p, _)| p != &e.0);
        v.push(*e);
    }
    v
}

fn configured(files: &[(&str, &str)]) -> Configured {
    let dir = fake_root(&machine_files(files));
    Configured::read(&Root(dir.path().to_path_buf()), &[2, 3])
}

fn seen(cpu: u32, rows: Vec<(Promise, Seen)>, ticks: u64) -> CpuSeen {
    let mut s = CpuSeen {
        cpu,
        ticks,
        ..Default::default()
    };
    for (p, r) in rows {
        s.rows.entry(p).or_default().push(r);
    }
    s
}

fn row(class: CulpritClass, who: Who, count: u64, time_ns: u64) -> Seen {
    Seen {
        class: Some(class),
        name: format!("{who:?}"),
        count,
        time_ns,
        longest_ns: time_ns,
        who: Some(who),
        ..Default::default()
    }
}

fn tick_row(count: u64) -> (Promise, Seen) {
    (
        Promise::TickStopped,
        row(
            CulpritClass::TimerTick,
            Who::Hrtimer {
                soft: false,
                callback: TimerCallback::Tick,
            },
            count,
            count * 4_000,
        ),
    )
}

fn task_row() -> (Promise, Seen) {
    (
        Promise::NoOtherTasks,
        row(
            CulpritClass::Task,
            Who::Task {
                comm: "make".into(),
                pid: 99,
                policy: 0,
                container: None,
            },
            40,
            30_000_000,
        ),
    )
}

/// Judges CPU 2 of a 10 s check of CPUs 2,3 held by SCHED_OTHER spinners.
fn judge(c: &Configured, s: &CpuSeen, stops: &[TickStops]) -> Vec<Finding> {
    let machine = Machine {
        online: vec![0, 1, 2, 3],
        measured: vec![2, 3],
        virtual_machine: c.virtual_machine,
        tracer: Tracer::Watch,
    };
    let j = Judge {
        config: c,
        machine: &machine,
        duration_ns: 10_000_000_000,
        checked: Checked {
            rt_spinners: false,
            spinners: true,
        },
        tick_stops: stops,
        steal_clock: true,
    };
    j.cpu(s, &Counted::default())
}

fn of(f: &[Finding], p: Promise) -> &Finding {
    f.iter().find(|x| x.promise == p).unwrap()
}

#[test]
fn nothing_configured_and_culprits_seen_is_not_configured_with_the_boot_line_for_the_cpus() {
    let c = configured(&[]);
    let f = judge(&c, &seen(2, vec![tick_row(2_500), task_row()], 2_500), &[]);
    let tick = of(&f, Promise::TickStopped);
    assert_eq!(tick.verdict, Verdict::NotConfigured, "{tick:?}");
    assert!(!tick.configured);
    assert!(tick.why.contains("250/s"), "{}", tick.why);
    assert!(
        tick.fixes.iter().any(|x| x.contains("nohz_full=2-3")),
        "{:?}",
        tick.fixes
    );
    let tasks = of(&f, Promise::NoOtherTasks);
    assert_eq!(tasks.verdict, Verdict::NotConfigured);
    assert!(
        tasks
            .fixes
            .iter()
            .any(|x| x.contains("isolcpus=domain,managed_irq,2-3")),
        "{:?}",
        tasks.fixes
    );
    // Quiet promises hold, by observation only, and need no fix.
    let irqs = of(&f, Promise::NoDeviceIrqs);
    assert_eq!(irqs.verdict, Verdict::Held);
    assert!(irqs.fixes.is_empty());
    assert!(irqs.why.contains("by observation only"), "{}", irqs.why);
    // Nothing configures the IPIs: a quiet CPU is not said to be configured.
    let ipis = of(&f, Promise::NoCrossCpuInterrupts);
    assert_eq!(ipis.verdict, Verdict::Held);
    assert!(!ipis.why.contains("configured, and"), "{}", ipis.why);
}

#[test]
fn nohz_full_on_the_command_line_but_not_in_the_kernels_list_is_configured_but_not_effective() {
    let c = configured(&[
        ("/proc/cmdline", "root=/dev/vda nohz_full=2-3\n"),
        ("/boot/config-6.18.0", "CONFIG_NO_HZ_FULL=n\n"),
    ]);
    assert_eq!(c.boot.nohz_full, Some(vec![2, 3]));
    let f = judge(&c, &seen(2, vec![tick_row(2_500)], 2_500), &[]);
    let tick = of(&f, Promise::TickStopped);
    assert_eq!(tick.verdict, Verdict::Broken, "{tick:?}");
    assert!(tick.configured);
    assert!(tick.why.contains("not effective"), "{}", tick.why);
    assert!(
        tick.why.contains("without CONFIG_NO_HZ_FULL"),
        "{}",
        tick.why
    );
    assert!(
        tick.fixes.iter().any(|x| x.contains("CONFIG_NO_HZ_FULL=y")),
        "{:?}",
        tick.fixes
    );
}

#[test]
fn nohz_full_in_effect_holds_when_the_tick_stopped_and_says_why_when_it_did_not() {
    let files = [
        (
            "/proc/cmdline",
            "root=/dev/vda nohz_full=2-3 isolcpus=domain,2-3\n",
        ),
        ("/sys/devices/system/cpu/nohz_full", "2-3\n"),
        ("/sys/devices/system/cpu/isolated", "2-3\n"),
    ];
    let c = configured(&files);
    // One residual tick a second at most is a stopped tick.
    let f = judge(&c, &seen(2, vec![tick_row(8)], 8), &[]);
    let tick = of(&f, Promise::TickStopped);
    assert_eq!(tick.verdict, Verdict::Held, "{tick:?}");
    assert!(tick.configured);
    let tasks = of(&f, Promise::NoOtherTasks);
    assert_eq!(tasks.verdict, Verdict::Held);
    assert!(tasks.configured, "isolcpus in effect: {:?}", tasks.settings);

    // Ticks kept by the scheduler, with another task there: broken, and the kernel's reason.
    let stops = [TickStops {
        cpu: 2,
        stopped: 3,
        kept: vec![(TickDependency::Sched, 2_400)],
    }];
    let f = judge(
        &c,
        &seen(2, vec![tick_row(2_500), task_row()], 2_500),
        &stops,
    );
    let tick = of(&f, Promise::TickStopped);
    assert_eq!(tick.verdict, Verdict::Broken);
    assert!(tick.why.contains("the scheduler"), "{}", tick.why);
    assert!(tick.why.contains("other tasks ran here"), "{}", tick.why);
    assert_eq!(of(&f, Promise::NoOtherTasks).verdict, Verdict::Broken);
}

#[test]
fn irqs_unbound_work_and_cpusets_are_configured_from_their_files() {
    let c = configured(&[
        ("/sys/devices/virtual/workqueue/cpumask", "00000000,00000003\n"),
        (
            "/proc/interrupts",
            "           CPU0       CPU1       CPU2       CPU3\n 24:  1  2  3  4  PCI-MSIX  0-edge  virtio0-input\n",
        ),
        ("/proc/irq/24/smp_affinity_list", "0-1\n"),
        ("/proc/irq/24/effective_affinity_list", "2\n"),
    ]);
    let irq = (
        Promise::NoDeviceIrqs,
        Seen {
            irq: Some(24),
            ..row(
                CulpritClass::Irq,
                Who::Irq {
                    number: 24,
                    action: "virtio0-input".into(),
                },
                100,
                500_000,
            )
        },
    );
    let f = judge(&c, &seen(2, vec![irq], 0), &[]);
    let unbound = of(&f, Promise::NoUnboundWork);
    assert!(
        unbound.configured,
        "cpumask 0-1 keeps unbound work off CPU 2"
    );
    assert_eq!(unbound.verdict, Verdict::Held);
    let irqs = of(&f, Promise::NoDeviceIrqs);
    // Its effective affinity still includes CPU 2: not configured, and the driver said so.
    assert_eq!(irqs.verdict, Verdict::NotConfigured, "{irqs:?}");
    assert!(
        irqs.settings
            .iter()
            .any(|s| s.contains("ignores the affinity")),
        "{:?}",
        irqs.settings
    );
    // Once only: the interrupt that made a pending move (x86 moves an IRQ as it next fires).
    let once = (
        Promise::NoDeviceIrqs,
        Seen {
            irq: Some(24),
            ..row(
                CulpritClass::Irq,
                Who::Irq {
                    number: 24,
                    action: "virtio0-input".into(),
                },
                1,
                5_000,
            )
        },
    );
    let f = judge(&c, &seen(2, vec![once], 0), &[]);
    let irqs = of(&f, Promise::NoDeviceIrqs);
    assert_eq!(irqs.verdict, Verdict::NotConfigured, "{irqs:?}");
    let said = |what: &str| irqs.settings.iter().any(|s| s.contains(what));
    assert!(
        said("had not fired since") && !said("ignores the affinity"),
        "{:?}",
        irqs.settings
    );
    assert!(
        said("1 IRQ is delivered to CPU 2: 24 (virtio0-input, moved away, not yet fired since)"),
        "{:?}",
        irqs.settings
    );
}

#[test]
fn what_cannot_be_observed_is_said() {
    let c = configured(&[]);
    let f = judge(&c, &seen(2, vec![], 0), &[]);
    let rt = of(&f, Promise::NoRtThrottling);
    assert_eq!(rt.verdict, Verdict::CannotTell);
    assert!(rt.why.contains("--fifo"), "{}", rt.why);
    let freq = of(&f, Promise::SteadyFrequency);
    assert_eq!(
        freq.verdict,
        Verdict::CannotTell,
        "no cpufreq driver in the fake root"
    );
    assert!(freq.why.contains("host"), "{}", freq.why);
}

/// Checks `value` against the subset of JSON Schema the document uses (type, required,
/// properties, additionalProperties, items, enum, $ref into $defs).
fn validate(schema: &serde_json::Value, root: &serde_json::Value, v: &serde_json::Value, at: &str) {
    use serde_json::Value;
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return validate(&root["$defs"][name], root, v, at);
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        assert!(ok, "{at}: {v} is not {types:?}");
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        assert!(e.contains(v), "{at}: {v} not in {e:?}");
    }
    if let (Some(props), Some(obj)) = (schema.get("properties"), v.as_object()) {
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let k = req.as_str().unwrap();
            assert!(obj.contains_key(k), "{at}: missing {k}");
        }
        for (k, val) in obj {
            match props.get(k) {
                Some(s) => validate(s, root, val, &format!("{at}.{k}")),
                None => assert!(
                    schema.get("additionalProperties") != Some(&Value::Bool(false)),
                    "{at}: {k} is not in the schema"
                ),
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(items, root, x, &format!("{at}[{i}]"));
        }
    }
}

fn schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_json_form_follows_its_documented_schema() {
    use jitterscope::check::{CheckReport, SCHEMA};
    let c = configured(&[("/proc/cmdline", "root=/dev/vda nohz_full=2-3\n")]);
    let findings = judge(&c, &seen(2, vec![tick_row(2_500), task_row()], 2_500), &[]);
    let report = CheckReport {
        schema: SCHEMA.into(),
        host: "h".into(),
        kernel: c.kernel.clone(),
        cpus: vec![2, 3],
        siblings: vec![],
        duration_ns: 10_000_000_000,
        held_by: "a SCHED_OTHER spinner on each CPU".into(),
        exit_code: 1,
        findings,
        lost: vec![(2, 5)],
        tick_stops: vec![TickStops {
            cpu: 2,
            stopped: 1,
            kept: vec![(TickDependency::Rcu, 4)],
        }],
        counters: Default::default(),
        config: c,
        kubernetes: Some(kube_report()),
    };
    let text = jitterscope::check::render::text(&report, false);
    assert!(
        text.contains("CPU 2: exclusive to pod prod/trader container engine — BROKEN by 1 culprit from outside the pod"),
        "{text}"
    );
    assert!(
        text.contains("parser[4121] — another pod's container (pod prod/feed container parser)"),
        "{text}"
    );
    assert!(
        text.contains("CPU 3: no container's own (shared)"),
        "{text}"
    );
    assert!(
        text.contains("pod prod/trader container engine's exclusive CPU 2"),
        "{text}"
    );
    let md = jitterscope::check::render::markdown(&report);
    assert!(
        md.contains("## Kubernetes: the kubelet's CPU manager, policy static"),
        "{md}"
    );
    let v = serde_json::to_value(&report).unwrap();
    assert!(v["kubernetes"]["breaches"][0]["by"] == "other_pod", "{v}");
    let s = schema();
    validate(&s, &s, &v, "$");
    // The validator rejects what breaks the schema (it is not a test that cannot fail).
    let mut bad = v.clone();
    bad["findings"][0]["verdict"] = "maybe".into();
    let caught = std::panic::catch_unwind(|| validate(&s, &s, &bad, "$"));
    assert!(caught.is_err(), "an unknown verdict passed the schema");
    let mut bad = v.clone();
    bad.as_object_mut().unwrap().remove("findings");
    assert!(std::panic::catch_unwind(|| validate(&s, &s, &bad, "$")).is_err());
    let mut bad = v;
    bad["kubernetes"]["breaches"][0]["by"] = "a neighbour".into();
    assert!(std::panic::catch_unwind(|| validate(&s, &s, &bad, "$")).is_err());
}

/// The Kubernetes part of a report: CPU 2 exclusive to a pod's container, broken by another
/// pod's; CPU 3 shared.
fn kube_report() -> jitterscope::check::kube::KubeReport {
    use jitterscope::check::kube::{Breach, CpuOwner, Intruder, KubeReport};
    let uid = "8f1b2c3d-4e5f-6789-abcd-ef0123456789";
    let breach = |by: Intruder, name: &str| Breach {
        cpu: 2,
        pod_uid: uid.into(),
        pod: Some("prod/trader".into()),
        container: "engine".into(),
        by,
        name: name.into(),
        pid: Some(4121),
        detail: "pod prod/feed container parser".into(),
        promise: Promise::NoOtherTasks,
        count: 3,
        time_ns: 1_000,
        longest_ns: 500,
    };
    KubeReport {
        state_file: "/var/lib/kubelet/cpu_manager_state".into(),
        policy: "static".into(),
        default_cpus: vec![0, 1, 3],
        owners: vec![
            CpuOwner {
                cpu: 2,
                pod_uid: Some(uid.into()),
                pod: Some("prod/trader".into()),
                container: Some("engine".into()),
            },
            CpuOwner {
                cpu: 3,
                pod_uid: None,
                pod: None,
                container: None,
            },
        ],
        breaches: vec![breach(Intruder::OtherPod, "parser[4121]")],
        own: vec![breach(Intruder::OwnPod, "engine[4000]")],
        note: None,
    }
}
