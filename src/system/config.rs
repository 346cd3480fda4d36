//! The configured half of isolation: what the machine was told about its CPUs — the boot
//! command line, the kernel's own view of it in sysfs, the workqueue cpumask, sysctls, IRQ
//! affinities, cpusets, governors and idle states, SMT, VM or metal, and the affinity of every
//! task — read from a root directory (`/` on a live machine, a directory of files in tests).
//! `check` holds it against what the CPUs then did; every run file records it (`config`), and
//! `compare` shows what changed between two runs.
//!
//! Reading never fails: a file that is absent or unreadable leaves its field `None` (or empty),
//! which the reports show as "unknown", never as "off".

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::Cpu;

/// Where the configuration is read from: `/` on a live machine; in tests a directory holding
/// `proc/cmdline`, `sys/devices/system/cpu/…` and the rest at the same relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(pub PathBuf);

impl Root {
    pub fn live() -> Root {
        Root(PathBuf::from("/"))
    }

    /// `abs` (an absolute path on a live machine) under this root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.0.join(abs.trim_start_matches('/'))
    }
}

impl Default for Root {
    fn default() -> Root {
        Root::live()
    }
}

/// Everything the configured half knows, as recorded in run files (`config`) and `check`'s
/// JSON. Additive: new fields get `#[serde(default)]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Configured {
    /// `uname -r`.
    pub kernel: String,
    /// `/proc/cmdline` as the kernel booted with it.
    pub cmdline: String,
    /// The isolation parameters parsed from `cmdline`.
    pub boot: BootParams,
    /// `/sys/devices/system/cpu/online`.
    pub online: Vec<Cpu>,
    /// `/sys/devices/system/cpu/isolated`: the CPUs the kernel took out of scheduler domains
    /// (`isolcpus=` with the `domain` flag, or none). None when the file is absent.
    pub isolated: Option<Vec<Cpu>>,
    /// `/sys/devices/system/cpu/nohz_full`: the CPUs the kernel runs tickless with one task.
    /// None when the file is absent (a kernel built without CONFIG_NO_HZ_FULL).
    pub nohz_full: Option<Vec<Cpu>>,
    /// The kernel build's options that isolation needs, from `/boot/config-<release>` or
    /// `/proc/config.gz`.
    pub kernel_config: KernelConfig,
    /// `/sys/devices/virtual/workqueue/cpumask`: where unbound work may run. None when absent.
    pub workqueue_cpumask: Option<Vec<Cpu>>,
    pub sysctls: Sysctls,
    /// One entry per CPU checked (or measured, in run files).
    pub cpus: Vec<CpuConfig>,
    /// `/sys/devices/system/cpu/smt/active`; None when the file is absent.
    pub smt_active: Option<bool>,
    /// The machine is a guest: the `hypervisor` CPU flag.
    pub virtual_machine: bool,
    /// The hypervisor's name where the guest can tell it: `/sys/hypervisor/type` (Xen), else
    /// the paravirtual clocksource it offers (`kvm-clock` → `kvm`, `xen`, `hyperv…` →
    /// `hyperv`), else on a guest the DMI system vendor as written (`QEMU`).
    pub hypervisor: Option<String>,
    /// Every IRQ with a handler (a line of `/proc/interrupts` with a number).
    pub irqs: Vec<IrqConfig>,
    pub irqbalance: Irqbalance,
    /// cpusets that isolate: cgroup v2 partitions (`cpuset.cpus.partition` of `root` or
    /// `isolated`), cgroup v1 exclusive sets, and the systemd slices' CPUs (`AllowedCPUs=` as
    /// the cgroup shows it: `system.slice`, `user.slice`, `init.scope`).
    pub cpusets: Vec<CpusetConfig>,
    /// For each CPU checked: how many tasks may run there (`Cpus_allowed_list` of every task).
    pub tasks_allowed: Vec<TasksAllowed>,
    /// `tuned`'s active profile and its isolation variables, where tuned is installed.
    pub tuned: Option<Tuned>,
}

/// The boot command line's isolation parameters. A parameter absent from the command line is
/// None; one present with a list the kernel cannot parse keeps its text in `unparsed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootParams {
    pub isolcpus: Option<Isolcpus>,
    pub nohz_full: Option<Vec<Cpu>>,
    pub rcu_nocbs: Option<Vec<Cpu>>,
    pub irqaffinity: Option<Vec<Cpu>>,
    /// Other parameters that change what the CPUs do, as written (`nohz=off`, `idle=poll`,
    /// `intel_idle.max_cstate=0`, `processor.max_cstate=1`, `intel_pstate=disable`,
    /// `skew_tick=1`, `rcu_nocb_poll`, `nosoftlockup`, `nowatchdog`, `nmi_watchdog=0`,
    /// `tsc=reliable`, `mitigations=off` …): `(name, value)`, value empty for a flag.
    pub others: Vec<(String, String)>,
    /// Isolation parameters whose CPU list did not parse: `(name, value)`.
    pub unparsed: Vec<(String, String)>,
}

/// `isolcpus=[flags,]list`: flags `domain`, `managed_irq`, `nohz` (none given means
/// `domain`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Isolcpus {
    pub flags: Vec<String>,
    pub cpus: Vec<Cpu>,
}

/// Kernel build options; each None when the kernel's configuration could not be read (an
/// option absent from a configuration that was read is `false`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelConfig {
    /// Where the options were read from (`/boot/config-6.18.0`), empty when nowhere.
    pub source: String,
    pub no_hz_full: Option<bool>,
    pub rcu_nocb_cpu: Option<bool>,
    /// CONFIG_HZ.
    pub hz: Option<u32>,
    /// The preemption model by its option's name (`PREEMPT_NONE`, `PREEMPT_VOLUNTARY`,
    /// `PREEMPT`, `PREEMPT_RT`), with `+PREEMPT_DYNAMIC` when it can be changed at boot.
    pub preempt: Option<String>,
}

/// The sysctls isolation depends on; None when unreadable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sysctls {
    /// `vm.stat_interval`, seconds.
    pub stat_interval: Option<u32>,
    /// `kernel.timer_migration`.
    pub timer_migration: Option<bool>,
    /// `kernel.sched_rt_runtime_us` (-1: RT throttling off).
    pub sched_rt_runtime_us: Option<i64>,
    /// `kernel.sched_rt_period_us`.
    pub sched_rt_period_us: Option<u64>,
    /// `kernel.watchdog_cpumask`.
    pub watchdog_cpumask: Option<Vec<Cpu>>,
    /// `kernel.nmi_watchdog`.
    pub nmi_watchdog: Option<bool>,
}

/// One CPU's frequency and idle settings and its SMT siblings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuConfig {
    pub cpu: Cpu,
    /// `cpufreq/scaling_governor`; None without a cpufreq driver.
    pub governor: Option<String>,
    /// `cpufreq/scaling_driver`.
    pub freq_driver: Option<String>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` (the same for every CPU).
    pub idle_driver: Option<String>,
    /// The CPU's idle states in order (`cpuidle/stateN`).
    pub idle_states: Vec<IdleState>,
    /// `power/pm_qos_resume_latency_us` as written (`0` means no constraint, `n/a` …).
    pub resume_latency_us: Option<String>,
    /// `topology/thread_siblings_list` without the CPU itself.
    pub siblings: Vec<Cpu>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    pub name: String,
    /// Exit latency, µs.
    pub latency_us: u64,
    pub disabled: bool,
}

/// One IRQ's affinity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IrqConfig {
    pub irq: u32,
    /// Its actions as `/proc/interrupts` names them (`virtio0-requests`).
    pub name: String,
    /// `smp_affinity_list`: where it may be delivered.
    pub affinity: Vec<Cpu>,
    /// `effective_affinity_list`: where the interrupt controller delivers it now (None where
    /// the kernel does not say).
    pub effective: Option<Vec<Cpu>>,
    /// A kernel-managed IRQ (its affinity cannot be changed from user space), where it can be
    /// told (debugfs `irq/irqs/N` shows `IRQD_AFFINITY_MANAGED`); None when unknown.
    pub managed: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Irqbalance {
    /// An `irqbalance` process is running.
    pub running: bool,
    /// `IRQBALANCE_BANNED_CPULIST` (or the mask `IRQBALANCE_BANNED_CPUS`) from its
    /// configuration (`/etc/default/irqbalance`, `/etc/sysconfig/irqbalance`).
    pub banned: Option<Vec<Cpu>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpusetConfig {
    /// The cgroup's path under the cgroup root (`/system.slice`, `/jitterscope-system`).
    pub path: String,
    /// `cpuset.cpus.effective` (v2) or `cpuset.cpus` (v1).
    pub cpus: Vec<Cpu>,
    /// v2 `cpuset.cpus.partition` (`root`, `isolated`, `member`, or an invalid state as
    /// written); None on v1.
    pub partition: Option<String>,
    /// v1 `cpuset.cpu_exclusive`.
    pub exclusive: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TasksAllowed {
    pub cpu: Cpu,
    /// User-space tasks (threads) whose affinity includes the CPU.
    pub tasks: u32,
    /// Kernel threads whose affinity includes the CPU (per-CPU ones included).
    pub kthreads: u32,
    /// Tasks counted (the bound on the scan, `MAX_TASKS`, may cut it short: then true).
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    /// `/etc/tuned/active_profile`.
    pub profile: String,
    /// `isolated_cores=` of `/etc/tuned/cpu-partitioning-variables.conf` (or realtime's), as
    /// written.
    pub isolated_cores: Option<String>,
}

impl Configured {
    /// Reads the configuration under `root` for the CPUs `cpus` (the per-CPU entries).
    pub fn read(root: &Root, cpus: &[Cpu]) -> Configured {
        read::configured(root, cpus)
    }

    /// A cpuset partition (`root` or `isolated`, below the top) that holds `cpu`.
    pub fn partition_holding(&self, cpu: Cpu) -> Option<&CpusetConfig> {
        self.cpusets.iter().find(|s| {
            s.path != "/"
                && s.cpus.contains(&cpu)
                && matches!(s.partition.as_deref(), Some("isolated" | "root"))
        })
    }

    /// The entry of `cpu`, if it was read.
    pub fn cpu(&self, cpu: Cpu) -> Option<&CpuConfig> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }
}

mod read;

/// The kernel's CPU-list syntax, for other readers of the system's files.
pub(crate) use read::parse_cpulist;
pub(crate) use read::read_capped;
