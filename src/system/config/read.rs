//! Reading `Configured` from a root directory: each part of the configuration has its own
//! reader (boot line, sysfs, kernel build, IRQs, cpusets, tasks); none of them fails, an absent
//! or unreadable file leaves its field None or empty.

use std::io::Read;
use std::path::Path;

use super::{Configured, CpuConfig, IdleState, KernelConfig, Root, Sysctls, Tuned};
use crate::model::Cpu;

mod boot;
mod cpulist;
mod cpusets;
mod irqs;
mod tasks;
#[cfg(test)]
mod tests;

pub(crate) use cpulist::{parse_cpulist, parse_hex_mask};

/// The most read of any one file: every sysfs, proc and configuration file read here is far
/// below it.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Idle states read per CPU (the kernel's CPUIDLE_STATE_MAX is 10).
const MAX_IDLE_STATES: usize = 16;

pub(super) fn configured(root: &Root, cpus: &[Cpu]) -> Configured {
    let online = read_list(root, "/sys/devices/system/cpu/online").unwrap_or_default();
    let present = read_list(root, "/sys/devices/system/cpu/present").unwrap_or_default();
    // `N` in a boot list is the last CPU the kernel knows.
    let last = present.iter().chain(online.iter()).max().copied();
    let cmdline = read_text(root, "/proc/cmdline")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let (virtual_machine, hypervisor) = machine(root);
    Configured {
        kernel: read_trimmed(root, "/proc/sys/kernel/osrelease").unwrap_or_default(),
        boot: boot::parse(&cmdline, last),
        cmdline,
        isolated: read_list(root, "/sys/devices/system/cpu/isolated"),
        nohz_full: read_list(root, "/sys/devices/system/cpu/nohz_full"),
        online,
        kernel_config: kernel_config(root),
        workqueue_cpumask: read_trimmed(root, "/sys/devices/virtual/workqueue/cpumask")
            .and_then(|s| parse_hex_mask(&s)),
        sysctls: sysctls(root),
        cpus: cpus.iter().map(|&cpu| cpu_config(root, cpu)).collect(),
        smt_active: read_trimmed(root, "/sys/devices/system/cpu/smt/active").map(|s| s == "1"),
        virtual_machine,
        hypervisor,
        irqs: irqs::read(root),
        irqbalance: irqs::irqbalance(root),
        cpusets: cpusets::read(root),
        tasks_allowed: tasks::allowed(root, cpus),
        tuned: tuned(root),
    }
}

/// At most `cap` bytes of a file, as text (invalid UTF-8 replaced).
/// (`input::read_proc`: None when it is longer than `cap`.)
pub(crate) fn read_capped(path: &Path, cap: u64) -> Option<String> {
    let limit = crate::platform::input::Limit {
        bytes: cap,
        name: "the configuration file limit",
        shape: crate::platform::input::Shape::Bytes,
    };
    crate::platform::input::read_proc(path, limit)
}

pub(super) fn read_text(root: &Root, abs: &str) -> Option<String> {
    read_capped(&root.path(abs), MAX_FILE_BYTES)
}

pub(super) fn read_trimmed(root: &Root, abs: &str) -> Option<String> {
    read_text(root, abs).map(|s| s.trim().to_string())
}

/// A kernel CPU list file; `(null)` (how `nohz_full` reads when none is set) is empty. A file
/// that does not parse reads as absent.
pub(super) fn read_list(root: &Root, abs: &str) -> Option<Vec<Cpu>> {
    let text = read_trimmed(root, abs)?;
    if text == "(null)" {
        return Some(Vec::new());
    }
    parse_cpulist(&text, None)
}

fn kernel_config(root: &Root) -> KernelConfig {
    let release = read_trimmed(root, "/proc/sys/kernel/osrelease").unwrap_or_default();
    let boot = format!("/boot/config-{release}");
    let text = (!release.is_empty())
        .then(|| read_text(root, &boot).map(|t| (boot.clone(), t)))
        .flatten()
        .or_else(|| read_config_gz(root).map(|t| ("/proc/config.gz".to_string(), t)));
    match text {
        Some((source, text)) => parse_kernel_config(source, &text),
        None => KernelConfig::default(),
    }
}

/// `/proc/config.gz` decompressed, at most 16 MiB of text (a full config is ~300 KiB).
fn read_config_gz(root: &Root) -> Option<String> {
    let file = std::fs::File::open(root.path("/proc/config.gz")).ok()?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file.take(MAX_FILE_BYTES))
        .take(16 * MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The options isolation needs from a kernel `.config`; an option not set reads `false` (the
/// whole configuration was read, so its absence is known).
pub(super) fn parse_kernel_config(source: String, text: &str) -> KernelConfig {
    let value = |name: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
            .map(str::trim)
    };
    let set = |name: &str| value(name) == Some("y");
    let model = ["PREEMPT_RT", "PREEMPT", "PREEMPT_VOLUNTARY", "PREEMPT_NONE"]
        .into_iter()
        .find(|m| set(&format!("CONFIG_{m}")))
        .map(|m| {
            if set("CONFIG_PREEMPT_DYNAMIC") {
                format!("{m}+PREEMPT_DYNAMIC")
            } else {
                m.to_string()
            }
        });
    KernelConfig {
        source,
        no_hz_full: Some(set("CONFIG_NO_HZ_FULL")),
        rcu_nocb_cpu: Some(set("CONFIG_RCU_NOCB_CPU")),
        hz: value("CONFIG_HZ").and_then(|v| v.parse().ok()),
        preempt: model,
    }
}

fn sysctls(root: &Root) -> Sysctls {
    let get = |name: &str| read_trimmed(root, &format!("/proc/sys/{name}"));
    let flag = |name: &str| {
        get(name)
            .and_then(|v| v.parse::<u32>().ok())
            .map(|v| v != 0)
    };
    Sysctls {
        stat_interval: get("vm/stat_interval").and_then(|v| v.parse().ok()),
        timer_migration: flag("kernel/timer_migration"),
        sched_rt_runtime_us: get("kernel/sched_rt_runtime_us").and_then(|v| v.parse().ok()),
        sched_rt_period_us: get("kernel/sched_rt_period_us").and_then(|v| v.parse().ok()),
        watchdog_cpumask: get("kernel/watchdog_cpumask").and_then(|v| parse_cpulist(&v, None)),
        nmi_watchdog: flag("kernel/nmi_watchdog"),
    }
}

fn cpu_config(root: &Root, cpu: Cpu) -> CpuConfig {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}");
    let get = |rel: &str| read_trimmed(root, &format!("{dir}/{rel}"));
    let idle_states = (0..MAX_IDLE_STATES)
        .map_while(|n| {
            let state = |f: &str| get(&format!("cpuidle/state{n}/{f}"));
            Some(IdleState {
                name: state("name")?,
                latency_us: state("latency").and_then(|v| v.parse().ok()).unwrap_or(0),
                disabled: state("disable").is_some_and(|v| v != "0"),
            })
        })
        .collect();
    let siblings = get("topology/thread_siblings_list")
        .and_then(|v| parse_cpulist(&v, None))
        .unwrap_or_default()
        .into_iter()
        .filter(|&c| c != cpu)
        .collect();
    CpuConfig {
        cpu,
        governor: get("cpufreq/scaling_governor"),
        freq_driver: get("cpufreq/scaling_driver"),
        idle_driver: read_trimmed(root, "/sys/devices/system/cpu/cpuidle/current_driver"),
        idle_states,
        resume_latency_us: get("power/pm_qos_resume_latency_us"),
        siblings,
    }
}

/// A guest, and its hypervisor's name: `/sys/hypervisor/type` where the guest has it (Xen),
/// else the paravirtual clock the hypervisor offers (`kvm-clock`, `xen`, Hyper-V's), else the
/// DMI system vendor as written (`QEMU`, `VMware, Inc.`) when the CPU says it is a guest.
fn machine(root: &Root) -> (bool, Option<String>) {
    let guest = read_capped(&root.path("/proc/cpuinfo"), 4 * MAX_FILE_BYTES).is_some_and(|t| {
        t.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
    });
    let clocks = read_trimmed(
        root,
        "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    )
    .unwrap_or_default();
    let by_clock = clocks.split_whitespace().find_map(|c| match c {
        "kvm-clock" => Some("kvm"),
        "xen" => Some("xen"),
        c if c.starts_with("hyperv") => Some("hyperv"),
        _ => None,
    });
    let name = read_trimmed(root, "/sys/hypervisor/type")
        .filter(|s| !s.is_empty())
        .or_else(|| by_clock.map(str::to_string))
        .or_else(|| {
            guest
                .then(|| read_trimmed(root, "/sys/class/dmi/id/sys_vendor"))
                .flatten()
                .filter(|s| !s.is_empty())
        });
    (guest, name)
}

fn tuned(root: &Root) -> Option<Tuned> {
    let profile = read_trimmed(root, "/etc/tuned/active_profile")?;
    let isolated_cores = [
        "/etc/tuned/cpu-partitioning-variables.conf",
        "/etc/tuned/realtime-variables.conf",
    ]
    .iter()
    .find_map(|f| {
        read_text(root, f)?.lines().find_map(|l| {
            let l = l.trim();
            l.strip_prefix("isolated_cores")
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix('='))
                .map(|v| v.trim().to_string())
        })
    });
    Some(Tuned {
        profile,
        isolated_cores,
    })
}
