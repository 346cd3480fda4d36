//! The reader against fake roots built in a temporary directory, and once against `/`.

use std::io::Write;

use super::boot::parse;
use super::cpulist::{parse_cpulist, parse_hex_mask};
use super::irqs::{banned, parse_interrupts};
use crate::system::config::{Configured, CpusetConfig, IdleState, Isolcpus, Root};

/// A root directory of files at their live paths.
struct FakeRoot(tempfile::TempDir);

impl FakeRoot {
    fn new() -> FakeRoot {
        FakeRoot(tempfile::tempdir().expect("temp dir"))
    }

    fn root(&self) -> Root {
        Root(self.0.path().to_path_buf())
    }

    fn file(&self, abs: &str, text: &str) -> &FakeRoot {
        let path = self.root().path(abs);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        self
    }

    fn dir(&self, abs: &str) -> &FakeRoot {
        std::fs::create_dir_all(self.root().path(abs)).expect("mkdir");
        self
    }
}

#[test]
fn cpulists_as_the_kernel_reads_them() {
    assert_eq!(parse_cpulist("0-3,8", None), Some(vec![0, 1, 2, 3, 8]));
    assert_eq!(parse_cpulist("", None), Some(vec![]));
    assert_eq!(parse_cpulist("3,1,1", None), Some(vec![1, 3]));
    // Strides: two of every four from 0 to 9.
    assert_eq!(parse_cpulist("0-9:2/4", None), Some(vec![0, 1, 4, 5, 8, 9]));
    assert_eq!(parse_cpulist("1-N", Some(3)), Some(vec![1, 2, 3]));
    assert_eq!(parse_cpulist("N", Some(7)), Some(vec![7]));
    for bad in [
        "1-N", "3-1", "a", "1,,2", "1-", "0-7:3/2", "0-7:1/0", "99999999",
    ] {
        let last = None;
        assert_eq!(parse_cpulist(bad, last), None, "{bad}");
    }
}

#[test]
fn hex_masks_with_commas() {
    assert_eq!(parse_hex_mask("00000000,00000003"), Some(vec![0, 1]));
    assert_eq!(parse_hex_mask("f"), Some(vec![0, 1, 2, 3]));
    assert_eq!(parse_hex_mask("00000001,00000000"), Some(vec![32]));
    assert_eq!(parse_hex_mask("0"), Some(vec![]));
    assert_eq!(parse_hex_mask("xyz"), None);
    assert_eq!(parse_hex_mask(""), None);
}

#[test]
fn boot_parameters_flags_lists_and_others() {
    let boot = parse(
        "BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,domain,2-N nohz_full=1-3:1/2 \
         rcu_nocbs=all irqaffinity=0 idle=poll nowatchdog quiet mitigations=off \
         -- nohz_full=0",
        Some(3),
    );
    assert_eq!(
        boot.isolcpus,
        Some(Isolcpus {
            flags: vec!["managed_irq".into(), "domain".into()],
            cpus: vec![2, 3]
        })
    );
    assert_eq!(boot.nohz_full, Some(vec![1, 3]), "after `--` goes to init");
    assert_eq!(boot.rcu_nocbs, Some(vec![0, 1, 2, 3]));
    assert_eq!(boot.irqaffinity, Some(vec![0]));
    assert_eq!(
        boot.others,
        vec![
            ("idle".to_string(), "poll".to_string()),
            ("nowatchdog".to_string(), String::new()),
            ("mitigations".to_string(), "off".to_string()),
        ]
    );
    assert!(boot.unparsed.is_empty());

    let plain = parse("isolcpus=1,3 rcu_nocbs", Some(3));
    assert_eq!(plain.isolcpus.expect("isolcpus").flags, vec!["domain"]);
    assert_eq!(plain.rcu_nocbs, Some(vec![]));
    assert_eq!(plain.nohz_full, None);

    let bad = parse("isolcpus=bogus,1 nohz_full=1-x irqaffinity=3-1", Some(3));
    assert_eq!(bad.isolcpus, None);
    assert_eq!(bad.nohz_full, None);
    assert_eq!(
        bad.unparsed,
        vec![
            ("isolcpus".to_string(), "bogus,1".to_string()),
            ("nohz_full".to_string(), "1-x".to_string()),
            ("irqaffinity".to_string(), "3-1".to_string()),
        ]
    );
}

#[test]
fn interrupts_names_are_the_actions() {
    let text = "           CPU0       CPU1       \n \
 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
 31:       3739        641 PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats\n \
 40:          0          0  IR-PCI-MSI 327680-edge      xhci_hcd, i8042\n \
 11:          0          0     GICv3  27 Level     arch_timer\n\
NMI:          0          0   Non-maskable interrupts\n";
    assert_eq!(
        parse_interrupts(text),
        vec![
            (24, "ACPI:Ged".to_string()),
            (31, "virtio0-stats".to_string()),
            (40, "xhci_hcd, i8042".to_string()),
            (11, "arch_timer".to_string()),
        ]
    );
}

#[test]
fn irqbalance_banned_list_or_mask() {
    assert_eq!(
        banned("# IRQBALANCE_BANNED_CPULIST=0\nIRQBALANCE_BANNED_CPULIST=\"2-3\"\n"),
        Some(vec![2, 3])
    );
    assert_eq!(
        banned("IRQBALANCE_BANNED_CPUS='00000000,0000000c'\n"),
        Some(vec![2, 3])
    );
    assert_eq!(banned("IRQBALANCE_ONESHOT=yes\n"), None);
}

/// A machine with every file the reader knows.
fn full_root() -> FakeRoot {
    let fake = FakeRoot::new();
    let cpu = "/sys/devices/system/cpu";
    fake.file("/proc/sys/kernel/osrelease", "6.18.0-test\n")
        .file("/proc/cmdline", "ro isolcpus=nohz,2-3 nohz_full=2-N\n")
        .file(&format!("{cpu}/online"), "0-3\n")
        .file(&format!("{cpu}/present"), "0-3\n")
        .file(&format!("{cpu}/isolated"), "2-3\n")
        .file(&format!("{cpu}/nohz_full"), "2-3\n")
        .file(&format!("{cpu}/smt/active"), "1\n")
        .file(&format!("{cpu}/cpuidle/current_driver"), "intel_idle\n")
        .file(&format!("{cpu}/cpu2/cpufreq/scaling_governor"), "performance\n")
        .file(&format!("{cpu}/cpu2/cpufreq/scaling_driver"), "intel_pstate\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state0/name"), "POLL\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state0/latency"), "0\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state0/disable"), "0\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state1/name"), "C6\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state1/latency"), "170\n")
        .file(&format!("{cpu}/cpu2/cpuidle/state1/disable"), "1\n")
        .file(&format!("{cpu}/cpu2/power/pm_qos_resume_latency_us"), "0\n")
        .file(&format!("{cpu}/cpu2/topology/thread_siblings_list"), "0,2\n")
        .file("/sys/devices/virtual/workqueue/cpumask", "00000000,00000003\n")
        .file("/proc/sys/vm/stat_interval", "10\n")
        .file("/proc/sys/kernel/timer_migration", "0\n")
        .file("/proc/sys/kernel/sched_rt_runtime_us", "-1\n")
        .file("/proc/sys/kernel/sched_rt_period_us", "1000000\n")
        .file("/proc/sys/kernel/watchdog_cpumask", "0-1\n")
        .file("/proc/sys/kernel/nmi_watchdog", "0\n")
        .file("/boot/config-6.18.0-test", "CONFIG_NO_HZ_FULL=y\n# CONFIG_RCU_NOCB_CPU is not set\nCONFIG_HZ=1000\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n")
        .file("/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor sse\n")
        .file("/sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc kvm-clock acpi_pm\n")
        .file("/proc/interrupts", "           CPU0       CPU1       CPU2       CPU3\n 36:  1  2  3  4  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nLOC:  1  2  3  4   Local timer interrupts\n")
        .file("/proc/irq/36/smp_affinity_list", "0-1\n")
        .file("/proc/irq/36/effective_affinity_list", "1\n")
        .file("/sys/kernel/debug/irq/irqs/36", "handler:  handle_edge_irq\ndstate:   0x3400a200\n            IRQD_AFFINITY_MANAGED\n")
        .file("/proc/17/comm", "irqbalance\n")
        .file("/etc/sysconfig/irqbalance", "IRQBALANCE_BANNED_CPULIST=2-3\n")
        .file("/etc/tuned/active_profile", "cpu-partitioning\n")
        .file("/etc/tuned/cpu-partitioning-variables.conf", "# isolated_cores=1\nisolated_cores=2-3\n");
    // Tasks: a user thread allowed everywhere, a kernel thread on CPU 2 (told by `Kthread:`),
    // one on CPU 3 (told by PF_KTHREAD on a kernel without `Kthread:`).
    fake.file(
        "/proc/17/task/17/status",
        "Name:\tirqbalance\nKthread:\t0\nCpus_allowed_list:\t0-3\n",
    )
    .file(
        "/proc/18/task/18/status",
        "Name:\tkworker/2:1\nKthread:\t1\nCpus_allowed_list:\t2\n",
    )
    .file(
        "/proc/18/task/19/status",
        "Name:\tfoo\nKthread:\t0\nCpus_allowed_list:\t0-1\n",
    )
    .file(
        "/proc/20/task/20/status",
        "Name:\tksoftirqd/3\nCpus_allowed_list:\t3\n",
    )
    .file(
        "/proc/20/task/20/stat",
        "20 (ksoftirqd/3) S 2 0 0 0 -1 69238848 0 0\n",
    );
    // cgroup v2: a root partition, a member, and the system slice.
    let cg = "/sys/fs/cgroup";
    fake.file(&format!("{cg}/cgroup.controllers"), "cpuset cpu\n")
        .file(&format!("{cg}/rt/cpuset.cpus.partition"), "isolated\n")
        .file(&format!("{cg}/rt/cpuset.cpus.effective"), "2-3\n")
        .file(&format!("{cg}/rt/child/cpuset.cpus.partition"), "member\n")
        .file(
            &format!("{cg}/system.slice/cpuset.cpus.partition"),
            "member\n",
        )
        .file(&format!("{cg}/system.slice/cpuset.cpus.effective"), "0-1\n");
    fake
}

#[test]
fn every_field_from_a_fake_root() {
    let fake = full_root();
    let c = Configured::read(&fake.root(), &[2, 3]);
    assert_eq!(c.kernel, "6.18.0-test");
    assert_eq!(c.cmdline, "ro isolcpus=nohz,2-3 nohz_full=2-N");
    assert_eq!(
        c.boot.isolcpus.as_ref().expect("isolcpus").flags,
        vec!["nohz"]
    );
    assert_eq!(c.boot.nohz_full, Some(vec![2, 3]));
    assert_eq!(c.online, vec![0, 1, 2, 3]);
    assert_eq!(c.isolated, Some(vec![2, 3]));
    assert_eq!(c.nohz_full, Some(vec![2, 3]));
    assert_eq!(c.kernel_config.source, "/boot/config-6.18.0-test");
    assert_eq!(c.kernel_config.no_hz_full, Some(true));
    assert_eq!(c.kernel_config.rcu_nocb_cpu, Some(false));
    assert_eq!(c.kernel_config.hz, Some(1000));
    assert_eq!(
        c.kernel_config.preempt.as_deref(),
        Some("PREEMPT_VOLUNTARY+PREEMPT_DYNAMIC")
    );
    assert_eq!(c.workqueue_cpumask, Some(vec![0, 1]));
    assert_eq!(c.sysctls.stat_interval, Some(10));
    assert_eq!(c.sysctls.timer_migration, Some(false));
    assert_eq!(c.sysctls.sched_rt_runtime_us, Some(-1));
    assert_eq!(c.sysctls.sched_rt_period_us, Some(1_000_000));
    assert_eq!(c.sysctls.watchdog_cpumask, Some(vec![0, 1]));
    assert_eq!(c.sysctls.nmi_watchdog, Some(false));
    let cpu2 = c.cpu(2).expect("cpu 2");
    assert_eq!(cpu2.governor.as_deref(), Some("performance"));
    assert_eq!(cpu2.freq_driver.as_deref(), Some("intel_pstate"));
    assert_eq!(cpu2.idle_driver.as_deref(), Some("intel_idle"));
    assert_eq!(
        cpu2.idle_states,
        vec![
            IdleState {
                name: "POLL".into(),
                latency_us: 0,
                disabled: false
            },
            IdleState {
                name: "C6".into(),
                latency_us: 170,
                disabled: true
            },
        ]
    );
    assert_eq!(cpu2.resume_latency_us.as_deref(), Some("0"));
    assert_eq!(cpu2.siblings, vec![0]);
    assert_eq!(c.cpu(3).expect("cpu 3").governor, None);
    assert_eq!(c.smt_active, Some(true));
    assert!(c.virtual_machine);
    assert_eq!(c.hypervisor.as_deref(), Some("kvm"));
    assert_eq!(c.irqs.len(), 1);
    let irq = &c.irqs[0];
    assert_eq!((irq.irq, irq.name.as_str()), (36, "virtio1-req.0"));
    assert_eq!(irq.affinity, vec![0, 1]);
    assert_eq!(irq.effective, Some(vec![1]));
    assert_eq!(irq.managed, Some(true));
    assert!(c.irqbalance.running);
    assert_eq!(c.irqbalance.banned, Some(vec![2, 3]));
    assert_eq!(
        c.cpusets,
        vec![
            CpusetConfig {
                path: "/rt".into(),
                cpus: vec![2, 3],
                partition: Some("isolated".into()),
                exclusive: None
            },
            CpusetConfig {
                path: "/system.slice".into(),
                cpus: vec![0, 1],
                partition: Some("member".into()),
                exclusive: None
            },
        ]
    );
    let on = |cpu| c.tasks_allowed.iter().find(|t| t.cpu == cpu).expect("cpu");
    assert_eq!(
        (on(2).tasks, on(2).kthreads, on(2).truncated),
        (1, 1, false)
    );
    assert_eq!((on(3).tasks, on(3).kthreads), (1, 1));
    let tuned = c.tuned.expect("tuned");
    assert_eq!(tuned.profile, "cpu-partitioning");
    assert_eq!(tuned.isolated_cores.as_deref(), Some("2-3"));
}

#[test]
fn absent_files_leave_fields_unknown() {
    let fake = FakeRoot::new();
    let c = Configured::read(&fake.root(), &[1]);
    assert_eq!(c.kernel, "");
    assert_eq!(c.online, Vec::<u32>::new());
    assert_eq!(c.isolated, None);
    assert_eq!(c.nohz_full, None);
    assert_eq!(c.workqueue_cpumask, None);
    assert_eq!(c.kernel_config.source, "");
    assert_eq!(c.kernel_config.no_hz_full, None);
    assert_eq!(c.sysctls.stat_interval, None);
    assert_eq!(c.smt_active, None);
    assert!(!c.virtual_machine);
    assert_eq!(c.hypervisor, None);
    assert!(c.irqs.is_empty() && c.cpusets.is_empty());
    assert_eq!(c.irqbalance.banned, None);
    assert!(!c.irqbalance.running);
    assert_eq!(c.tuned, None);
    assert_eq!(c.cpus.len(), 1);
    assert_eq!(c.cpu(1).expect("cpu 1").governor, None);
    assert_eq!(c.tasks_allowed[0].tasks, 0);
}

#[test]
fn malformed_files_and_null_lists() {
    let fake = FakeRoot::new();
    fake.file("/sys/devices/system/cpu/isolated", "\n")
        .file("/sys/devices/system/cpu/nohz_full", "(null)\n")
        .file("/sys/devices/virtual/workqueue/cpumask", "zz\n")
        .file("/proc/irq/5/smp_affinity_list", "0-\n")
        .file("/proc/interrupts", "  CPU0\n  5:  3  XT-PIC  timer\n")
        .file("/proc/sys/vm/stat_interval", "soon\n");
    let c = Configured::read(&fake.root(), &[0]);
    assert_eq!(c.isolated, Some(vec![]));
    assert_eq!(c.nohz_full, Some(vec![]));
    assert_eq!(c.workqueue_cpumask, None);
    assert_eq!(c.sysctls.stat_interval, None);
    assert_eq!(c.irqs[0].affinity, Vec::<u32>::new());
    assert_eq!(c.irqs[0].effective, None);
    assert_eq!(c.irqs[0].managed, None);
}

#[test]
fn kernel_config_from_proc_config_gz() {
    let fake = FakeRoot::new();
    fake.file("/proc/sys/kernel/osrelease", "6.1.0\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"CONFIG_HZ=250\nCONFIG_PREEMPT_RT=y\nCONFIG_RCU_NOCB_CPU=y\n")
        .expect("gzip");
    let path = fake.root().path("/proc/config.gz");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, gz.finish().expect("gzip")).expect("write");
    let k = Configured::read(&fake.root(), &[]).kernel_config;
    assert_eq!(k.source, "/proc/config.gz");
    assert_eq!(
        (k.hz, k.preempt.as_deref()),
        (Some(250), Some("PREEMPT_RT"))
    );
    assert_eq!((k.no_hz_full, k.rcu_nocb_cpu), (Some(false), Some(true)));
}

#[test]
fn cgroup_v1_exclusive_sets_and_the_root() {
    let fake = FakeRoot::new();
    let v1 = "/sys/fs/cgroup/cpuset";
    fake.file(&format!("{v1}/cpuset.cpus"), "0-3\n")
        .file(&format!("{v1}/cpuset.cpu_exclusive"), "1\n")
        .file(&format!("{v1}/rt/cpuset.cpus"), "2-3\n")
        .file(&format!("{v1}/rt/cpuset.cpu_exclusive"), "1\n")
        .file(&format!("{v1}/shared/cpuset.cpus"), "0-1\n")
        .file(&format!("{v1}/shared/cpuset.cpu_exclusive"), "0\n");
    let sets = Configured::read(&fake.root(), &[]).cpusets;
    let paths: Vec<(&str, &[u32], Option<bool>)> = sets
        .iter()
        .map(|s| (s.path.as_str(), s.cpus.as_slice(), s.exclusive))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("/", &[0, 1, 2, 3][..], Some(true)),
            ("/rt", &[2, 3][..], Some(true))
        ]
    );
    assert!(sets.iter().all(|s| s.partition.is_none()));
}

#[test]
fn cgroup_v2_walk_is_bounded_in_depth() {
    let fake = FakeRoot::new();
    let cg = "/sys/fs/cgroup";
    fake.file(&format!("{cg}/cgroup.controllers"), "cpuset\n");
    let deep = "/a/b/c/d/e/f/g";
    fake.file(&format!("{cg}{deep}/cpuset.cpus.partition"), "root\n")
        .file(&format!("{cg}{deep}/h/cpuset.cpus.partition"), "root\n")
        .file(&format!("{cg}{deep}/h/i/cpuset.cpus.partition"), "root\n")
        .dir(&format!("{cg}/user.slice"));
    let paths: Vec<String> = Configured::read(&fake.root(), &[])
        .cpusets
        .into_iter()
        .map(|s| s.path)
        .collect();
    // Depth 8 is the deepest visited; the slice without a cpuset file is left out.
    assert_eq!(paths, vec![deep.to_string(), format!("{deep}/h")]);
}

#[test]
fn the_live_root_reads() {
    let c = Configured::read(&Root::live(), &[0]);
    assert!(!c.online.is_empty(), "{c:?}");
    assert!(!c.kernel.is_empty(), "{c:?}");
    assert!(c.online.contains(&0));
}
