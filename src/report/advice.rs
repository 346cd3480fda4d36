//! What to do about each culprit, with the command for this machine's values.

use crate::model::{
    softirq_name, vector, vector_name, Cpu, Culprit, CulpritClass, Decision, FaultKind,
    TimerCallback, Who, WorkItem,
};
use crate::units::{cpumask_hex, format_list};

/// The CPU the kernel booted on (the x86 boot processor is CPU 0). The kernel keeps it for
/// housekeeping: `housekeeping_setup` (kernel/sched/isolation.c) puts it back and takes it
/// out of an `isolcpus=` or `nohz_full=` list that leaves no present CPU for housekeeping,
/// and `tick_nohz_init` (kernel/time/tick-sched.c) clears it from `nohz_full=` for
/// timekeeping on every kernel with SMP suspend (`CONFIG_PM_SLEEP_SMP` without
/// `CONFIG_PM_SLEEP_SMP_NONZERO_CPU`, as on x86).
pub const BOOT_CPU: Cpu = 0;

/// The machine facts advice depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Every online CPU.
    pub online: Vec<Cpu>,
    /// The CPUs the measured threads (a run's workload, a watch's threads) ran on: what the
    /// advice is about.
    pub measured: Vec<Cpu>,
    /// Whether this is a virtual machine (unexplained time is then often the host's).
    pub virtual_machine: bool,
    /// What measured: where jitterscope's own threads can be kept off the measured CPUs.
    pub tracer: Tracer,
}

/// What made the verdicts, for the advice on jitterscope's own time (`self`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracer {
    /// A run of the workload, deciding its culprits live or at the end.
    Run(Decision),
    /// A watch of the user's threads.
    Watch,
}

impl Machine {
    /// Online CPUs that are not measured: where noise should go.
    pub fn housekeeping(&self) -> Vec<Cpu> {
        self.online
            .iter()
            .copied()
            .filter(|c| !self.measured.contains(c))
            .collect()
    }

    /// The measured CPUs that are online.
    fn measured_online(&self) -> Vec<Cpu> {
        self.measured
            .iter()
            .copied()
            .filter(|c| self.online.contains(c))
            .collect()
    }

    /// The measured CPUs a `nohz_full=` list may name and keep: never the boot CPU.
    pub fn nohz_full(&self) -> Vec<Cpu> {
        let mut v = self.measured_online();
        v.retain(|&c| c != BOOT_CPU);
        v
    }

    /// The measured CPUs an `isolcpus=` list (any of its flags) may name and keep: all of
    /// them unless they are every online CPU, then all but the boot CPU.
    pub fn isolcpus(&self) -> Vec<Cpu> {
        let mut v = self.measured_online();
        if self.online.iter().all(|c| v.contains(c)) {
            v.retain(|&c| c != BOOT_CPU);
        }
        v
    }
}

/// `boot with nohz_full=1`: a boot setting with the CPUs the kernel accepts in it (`cpus`,
/// from `Machine::nohz_full` or `Machine::isolcpus`), or, with none, that it cannot help on
/// this machine and why.
pub(crate) fn boot_with(setting: &str, cpus: &[Cpu], m: &Machine) -> String {
    if !cpus.is_empty() {
        return format!("boot with {setting}{}", format_list(cpus));
    }
    let why = if m.online.len() <= 1 {
        "this machine has one CPU, which the kernel keeps for housekeeping".to_string()
    } else {
        format!("the kernel keeps boot CPU {BOOT_CPU} for housekeeping, and it is the only CPU measured")
    };
    format!("{} cannot help here: {why}", setting.trim_end_matches(','))
}

/// Known work functions and the knob that tames them.
fn work_function_advice(func: &str) -> Option<&'static str> {
    let base = func.split('+').next().unwrap_or(func);
    Some(match base {
        "vmstat_update" => "per-CPU VM statistics folding: raise the interval (sysctl vm.stat_interval=10) — nohz_full CPUs fold less often",
        "refresh_vm_stats" => "triggered by a write to /proc/sys/vm/stat_refresh (something ran `echo 1 > /proc/sys/vm/stat_refresh`); stop whoever does it",
        "lru_add_drain_per_cpu" => "LRU drains after mlock/munmap/migration elsewhere; avoid memory-management churn while latency matters",
        "drain_local_pages_wq" => "page allocator draining per-CPU lists (memory pressure or compaction); keep memory headroom",
        "flush_to_ldisc" => "tty input processing; keep consoles and serial ports off these CPUs",
        "blk_mq_run_work_fn" | "blk_mq_requeue_work" => "block I/O dispatch; steer the disk's IRQ and I/O submitters away",
        "psi_avgs_work" => "pressure-stall averaging; boot with psi=0 if PSI is not needed",
        "neigh_periodic_work" | "neigh_managed_work" => "network neighbour table upkeep; unbound, move it with the workqueue cpumask",
        "kfree_rcu_monitor" | "kfree_rcu_work" => "RCU freeing; boot with rcu_nocbs= for these CPUs",
        "wb_workfn" | "wb_update_bandwidth_workfn" => "page-cache writeback; lower dirty ratios or move writeback with the workqueue cpumask",
        "mmdrop_async_fn" => "process teardown; avoid short-lived processes on these CPUs",
        "sync_rcu_exp_select_node_cpus" => "expedited RCU grace periods (synchronize_rcu_expedited callers)",
        _ => return None,
    })
}

/// The local timer by what it ran (the probes split the vector by expired hrtimer).
fn timer_advice(who: &Who, m: &Machine, on: &str) -> String {
    let callback = match who {
        Who::Hrtimer { callback, .. } => callback,
        _ => &TimerCallback::Tick,
    };
    let sleeper = |task: String| {
        format!("a task's own timers (nanosleep, timerfd, poll timeouts) expiring on CPU {on}: {task} sleeps with a timer there — move it off the CPU (taskset -pc <other CPUs> <pid>) or make it sleep less often; nohz_full does not stop a task's timers")
    };
    match callback {
        TimerCallback::Wakeup { comm, pid } if *pid == crate::model::ANY_PID => sleeper(format!("{comm} (each of its tasks)")),
        TimerCallback::Wakeup { comm, pid } => sleeper(format!("{comm}[{pid}]")),
        TimerCallback::OwnSleep { comm } => sleeper(format!("{comm} (jitterscope's own sleep)")),
        TimerCallback::Tick => format!("the scheduler tick: {} (nohz_full stops the tick when exactly one task runs on the CPU; needs CONFIG_NO_HZ_FULL)", boot_with("nohz_full=", &m.nohz_full(), m)),
        TimerCallback::Function(f) if &**f == "watchdog_timer_fn" => format!("the soft-lockup watchdog's timer: sysctl kernel.watchdog_cpumask=<other CPUs> (or kernel.nmi_watchdog=0 and kernel.soft_watchdog=0) keeps it off CPU {on}"),
        TimerCallback::Function(f) => format!("an hrtimer callback ({f}) expiring on CPU {on}: find who arms it (perf record -e timer:hrtimer_start -C {on} -g); nohz_full stops only the tick"),
    }
}

/// jitterscope's own time: where its threads can go instead, or what is left to defer.
fn self_advice(tracer: Tracer, all_measured: bool, measured: &str) -> String {
    if !all_measured {
        return "jitterscope's own threads ran on a measured CPU although another CPU was free for them: a bug, please report it".to_string();
    }
    match tracer {
        Tracer::Run(Decision::Live) => format!("every CPU is measured ({measured}), so jitterscope's collector and drain thread run beside the workload and each of their slices stalls it: decide the culprits after the run (--attribution end, the default then for a run of up to a minute unless --metrics needs them live: only each second's histograms and a glance at the kernel's records run beside the workload), or measure fewer CPUs than the machine has — with one CPU left out, `self` is 0"),
        Tracer::Run(Decision::AtEnd { .. }) => format!("every CPU is measured ({measured}): what is left of jitterscope beside the workload is taking each second's histograms and glancing at the records in the rings for the live view's kernel time; with one CPU left out of --cpus it runs there and `self` is 0"),
        Tracer::Watch => format!("every CPU is watched ({measured}), so the watch's own threads run beside the watched ones: leave a CPU out (watch --cpus <the others>) and they run there"),
    }
}

/// The boot settings that isolate the measured CPUs, each with the CPUs the kernel keeps in
/// it: `isolcpus=1, nohz_full=1, rcu_nocbs=0-1` (`rcu_nocbs=` takes every CPU).
fn isolation(m: &Machine) -> String {
    let mut parts = Vec::new();
    for (setting, cpus) in [("isolcpus=", m.isolcpus()), ("nohz_full=", m.nohz_full())] {
        if !cpus.is_empty() {
            parts.push(format!("{setting}{}", format_list(&cpus)));
        }
    }
    parts.push(format!("rcu_nocbs={}", format_list(&m.measured)));
    parts.join(", ")
}

/// A softirq vector by what raises it.
fn softirq_advice(vector: u64, m: &Machine) -> String {
    let measured = format_list(&m.measured);
    let hk = m.housekeeping();
    let name = softirq_name(vector);
    match name.as_str() {
            "NET_RX" | "NET_TX" => format!("network softirqs: steer the NIC's IRQs and RPS (/sys/class/net/*/queues/rx-*/rps_cpus) to CPUs {}", if hk.is_empty() { "outside the measured set".into() } else { format_list(&hk) }),
            "TIMER" | "HRTIMER" => format!("timer callbacks on these CPUs: {}; move timers with sysctl kernel.timer_migration=1", boot_with("nohz_full=", &m.nohz_full(), m)),
            "RCU" => format!("RCU callback processing: boot with rcu_nocbs={measured}"),
            "SCHED" => format!("scheduler load balancing: isolate the CPUs from balancing: {}", boot_with("isolcpus=domain,", &m.isolcpus(), m)),
            "BLOCK" => format!("block I/O completions: steer the disk IRQ away (blk-mq managed IRQs refuse a new affinity: {})", boot_with("isolcpus=managed_irq,", &m.isolcpus(), m)),
            _ => format!("softirq {name}: find and steer the IRQ that raises it"),
    }
}

/// RT throttling (a SCHED_FIFO/RR thread) or a cgroup's CPU quota (any other policy): the
/// knob that removes it, and what removing RT throttling costs.
fn throttled_advice(who: &Who, m: &Machine) -> String {
    let realtime = matches!(who, Who::Throttled { policy } if is_realtime(*policy));
    if realtime {
        format!("RT throttling: the kernel gives real-time tasks kernel.sched_rt_runtime_us of every kernel.sched_rt_period_us (950000 of 1000000 by default) and idles the CPU for the rest; sysctl kernel.sched_rt_runtime_us=-1 removes it, but then the spinner starves the CPU's own kernel threads (per-CPU kworkers, ksoftirqd, RCU) — only on an isolated CPU ({}); or do not run the spinner SCHED_FIFO", boot_with("nohz_full=", &m.nohz_full(), m))
    } else {
        "a cgroup's CPU quota (cpu.max, CFS bandwidth) throttled the thread's group: raise it (echo max > /sys/fs/cgroup/<group>/cpu.max, or systemctl set-property <unit> CPUQuota=) or run the thread outside the limited group".to_string()
    }
}

/// SCHED_FIFO (1) or SCHED_RR (2): the policies RT throttling applies to (`sched.h`).
pub fn is_realtime(policy: u32) -> bool {
    matches!(policy, 1 | 2)
}

pub fn advice(c: &Culprit, cpus: &[Cpu], m: &Machine) -> String {
    let who = &c.who;
    let hk = m.housekeeping();
    let on_list = format_list(if cpus.is_empty() { &m.measured } else { cpus });
    let measured = format_list(&m.measured);
    let all_measured = hk.is_empty();
    let hk_list = format_list(&hk);
    match c.class {
        CulpritClass::Irq => {
            let irq = match who {
                Who::Irq { number, .. } => number.to_string(),
                _ => "N".to_string(),
            };
            if all_measured {
                format!("every CPU is measured, so IRQ {irq} cannot be moved off all of them; keep it off the consumer's CPU at least: echo <other CPUs> > /proc/irq/{irq}/smp_affinity_list (on a larger machine, measure a subset of CPUs)")
            } else {
                format!("steer it away: echo {hk_list} > /proc/irq/{irq}/smp_affinity_list (and stop irqbalance from moving it back: IRQBALANCE_BANNED_CPULIST={measured}); kernel-managed IRQs refuse this and need isolcpus=managed_irq,{} at boot", format_list(&m.isolcpus()))
            }
        }
        CulpritClass::Kworker => {
            let (name, function) = match who {
                Who::Work { worker, item } => (
                    &**worker,
                    match item {
                        WorkItem::Function(f) => &**f,
                        WorkItem::Unreadable | WorkItem::NoItem => "",
                    },
                ),
                _ => ("", ""),
            };
            let knob = work_function_advice(function)
                .map(|s| format!("{s}; "))
                .unwrap_or_default();
            let bound = name.starts_with("kworker/") && !name.starts_with("kworker/u");
            let mask = if all_measured {
                "every CPU is measured, so the workqueue cpumask cannot exclude all of them".to_string()
            } else {
                format!(
                    "keep unbound work off the measured CPUs: echo {} > /sys/devices/virtual/workqueue/cpumask",
                    cpumask_hex(&hk)
                )
            };
            let per_cpu = if bound {
                format!("; {name} is a per-CPU worker — its work was queued for CPU {on_list} specifically, so only removing the source{} helps", if m.nohz_full().is_empty() { String::new() } else { format!(" (or, for timer-driven work, {})", boot_with("nohz_full=", &m.nohz_full(), m)) })
            } else {
                String::new()
            };
            format!("{knob}{mask}{per_cpu}")
        }
        CulpritClass::Kthread => {
            let name = match who {
                Who::Kthread { comm } | Who::Task { comm, .. } => &**comm,
                _ => "",
            };
            // A per-CPU kernel thread's comm is its base name, `/`, its CPU.
            let base = name.split('/').next().unwrap_or(name);
            match base {
                "ksoftirqd" => format!("softirq overflow into ksoftirqd on CPU {on_list}: find the softirq source (see the softirq culprits) and steer its IRQ away"),
                "rcuc" | "rcuop" | "rcuog" | "rcu_preempt" | "rcu_sched" => format!("RCU callbacks: boot with rcu_nocbs={measured} rcu_nocb_poll to offload them"),
                "migration" => format!("the scheduler's stopper thread (migrations, CPU hotplug, stop_machine); isolate the CPUs: {}", boot_with("isolcpus=domain,", &m.isolcpus(), m)),
                "kcompactd0" | "kcompactd1" | "kswapd0" | "kswapd1" => "memory compaction/reclaim: keep memory headroom, sysctl vm.compaction_proactiveness=0".to_string(),
                _ => format!("kernel thread {name}: pin it away with taskset -pc {} <pid> if it allows, or isolate the CPUs at boot ({})", if all_measured { "<other CPUs>".to_string() } else { hk_list.clone() }, isolation(m)),
            }
        }
        CulpritClass::Task => {
            if m.online.len() <= 1 {
                format!("another task ran on CPU {on_list}, the machine's only CPU: nothing can shield it — stop the task, or give it a lower priority (nice, SCHED_IDLE)")
            } else if all_measured {
                format!("another task ran on CPU {on_list}; every CPU is measured, so a task kept off them has nowhere to run — stop the task, or measure a subset of CPUs (the kernel keeps boot CPU {BOOT_CPU} for housekeeping, so it isolates at most isolcpus={})", format_list(&m.isolcpus()))
            } else {
                format!("shield the CPUs: cset shield --cpu {measured} --kthread on (cgroup v1), or a cgroup v2 cpuset with cpuset.cpus.partition=isolated; at boot: isolcpus={}; or pin the task away: taskset -pc {hk_list} <pid>", format_list(&m.isolcpus()))
            }
        }
        CulpritClass::Softirq => match who {
            Who::Softirq { vector } => softirq_advice(*vector, m),
            _ => String::new(),
        },
        CulpritClass::TimerTick => timer_advice(who, m, &on_list),
        CulpritClass::Ipi => match who {
            Who::Vector { vector: vector::CALL_FUNCTION | vector::CALL_FUNCTION_SINGLE } => "cross-CPU function calls (TLB shootdowns, mprotect/munmap by other threads of the process, text patching such as attaching tracers): avoid memory-map changes in the latency-critical process; see who sent them in the detail".to_string(),
            Who::Vector { vector: vector::RESCHEDULE } => "wake-ups of tasks on this CPU: keep other tasks off it (cpuset shielding)".to_string(),
            Who::Vector { vector: vector::IRQ_WORK } => "irq_work: perf or BPF ring-buffer wake-ups, printk; avoid tracers that wake readers on every event".to_string(),
            Who::Vector { vector } => format!("{} interrupts: usually hardware or firmware", vector_name(*vector)),
            _ => String::new(),
        },
        CulpritClass::Nmi => "NMIs (watchdog, perf sampling): sysctl kernel.nmi_watchdog=0 and no perf sampling on these CPUs".to_string(),
        CulpritClass::FreqChange => format!("CPU frequency changes: cpupower -c {measured} frequency-set -g performance (or echo performance > /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor); disable deep C-states with idle=poll or the cpu_dma_latency PM QoS"),
        CulpritClass::Fault => if matches!(who, Who::Fault { kind: FaultKind::Major }) {
            "major page faults: the thread waited for I/O to map its memory — lock it in RAM (mlockall(MCL_CURRENT|MCL_FUTURE)) and touch it before the latency-critical loop starts".to_string()
        } else {
            "minor page faults: first touches of memory (or copy-on-write) in the latency-critical thread — pre-fault it at start (mlockall(MCL_CURRENT|MCL_FUTURE), MAP_POPULATE, touch every page), avoid allocating in the hot loop, and keep transparent huge pages from being split or compacted (echo never > /sys/kernel/mm/transparent_hugepage/defrag)".to_string()
        },
        CulpritClass::Throttled => throttled_advice(who, m),
        CulpritClass::SelfNoise => self_advice(m.tracer, all_measured, &measured),
        CulpritClass::Hypervisor => "the host ran something else on this vCPU's physical CPU (KVM steal time; `steal` in /proc/stat): ask for dedicated, pinned vCPUs (cpu pinning with no overcommit, a 'dedicated host' or 'isolated' instance type), or move the workload to bare metal".to_string(),
        CulpritClass::Lost => "the probes' record rings overflowed, so these stalls cannot be explained: raise --ringbuf-size (e.g. 64M), or find the storm on these CPUs with `jitterscope probe --cpus <cpu> --no-log`".to_string(),
        CulpritClass::Unexplained => {
            if m.virtual_machine {
                "no kernel event and no steal: on a VM, host interrupt handling and VM exits while the vCPU nominally ran (steal time does not count them) — dedicated vCPUs with the host's own interrupts and timers kept off them help; nothing inside the guest does".to_string()
            } else {
                "no kernel event: SMIs or hardware (check with turbostat's SMI column or perf stat -e msr/smi/); disable BIOS power management features".to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{vector, OwnIpiWhy};

    /// A culprit of every class, with the who each names.
    fn every_culprit() -> Vec<Culprit> {
        let t = |s: &str| -> crate::model::Text { s.into() };
        let mut v = vec![
            (
                CulpritClass::Irq,
                Who::Irq {
                    number: 11,
                    action: t("virtio0"),
                },
            ),
            (
                CulpritClass::Kworker,
                Who::Work {
                    worker: t("kworker/1:1"),
                    item: WorkItem::Function(t("vmstat_update")),
                },
            ),
            (
                CulpritClass::Kworker,
                Who::Work {
                    worker: t("kworker/u4:0"),
                    item: WorkItem::NoItem,
                },
            ),
            (
                CulpritClass::Task,
                Who::Task {
                    comm: t("bash"),
                    pid: 7,
                    policy: 0,
                    container: None,
                },
            ),
            (
                CulpritClass::TimerTick,
                Who::Hrtimer {
                    soft: false,
                    callback: TimerCallback::Tick,
                },
            ),
            (
                CulpritClass::TimerTick,
                Who::Hrtimer {
                    soft: false,
                    callback: TimerCallback::Function(t("it_real_fn")),
                },
            ),
            (CulpritClass::TimerTick, Who::LocalTimer { callbacks: true }),
            (
                CulpritClass::Ipi,
                Who::Vector {
                    vector: vector::RESCHEDULE,
                },
            ),
            (
                CulpritClass::Nmi,
                Who::Nmi {
                    handler: t("perf_event_nmi_handler"),
                },
            ),
            (
                CulpritClass::FreqChange,
                Who::Freq {
                    cpu: 1,
                    old_khz: 1,
                    new_khz: 2,
                    before_ns: 0,
                },
            ),
            (
                CulpritClass::Fault,
                Who::Fault {
                    kind: FaultKind::Minor,
                },
            ),
            (
                CulpritClass::SelfNoise,
                Who::OwnIpi {
                    vector: vector::RESCHEDULE,
                    why: OwnIpiWhy::WakeUp { sender: t("js") },
                },
            ),
            (CulpritClass::Throttled, Who::Throttled { policy: 1 }),
            (CulpritClass::Throttled, Who::Throttled { policy: 0 }),
            (CulpritClass::Hypervisor, Who::AnyHost),
            (
                CulpritClass::Unexplained,
                Who::Unexplained { steal_clock: true },
            ),
            (CulpritClass::Lost, Who::Lost),
        ];
        for comm in [
            "ksoftirqd/1",
            "rcuc/1",
            "migration/1",
            "kcompactd0",
            "khugepaged",
        ] {
            v.push((CulpritClass::Kthread, Who::Kthread { comm: t(comm) }));
        }
        for vector in 0..10 {
            v.push((CulpritClass::Softirq, Who::Softirq { vector }));
        }
        v.into_iter()
            .map(|(class, who)| Culprit { class, who })
            .collect()
    }

    /// Every `setting=LIST` in `text` (flags such as `domain,` skipped), as CPU numbers.
    fn lists(text: &str, setting: &str) -> Vec<Vec<Cpu>> {
        let mut out = Vec::new();
        for (at, _) in text.match_indices(setting) {
            let mut rest = &text[at + setting.len()..];
            // `isolcpus=domain cannot help here: …` names no list.
            let word_end = rest.find(' ').unwrap_or(rest.len());
            if rest[word_end..].starts_with(" cannot help here") {
                continue;
            }
            while let Some(i) = rest.find(',').filter(|&i| {
                i > 0
                    && rest[..i]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_')
            }) {
                rest = &rest[i + 1..];
            }
            let list: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '-')
                .collect();
            let mut cpus = Vec::new();
            for part in list.split(',').filter(|p| !p.is_empty()) {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                if let (Ok(a), Ok(b)) = (a.parse::<Cpu>(), b.parse::<Cpu>()) {
                    cpus.extend(a..=b);
                }
            }
            out.push(cpus);
        }
        out
    }

    /// Every advice for `m` (each CPU a culprit may have stolen on) with its culprit.
    fn every_advice(m: &Machine) -> Vec<(Culprit, String)> {
        let mut out = Vec::new();
        for c in every_culprit() {
            for on in [vec![], m.measured.clone()] {
                out.push((c.clone(), advice(&c, &on, m)));
            }
        }
        out
    }

    fn machine(online: &[Cpu], measured: &[Cpu], tracer: Tracer) -> Machine {
        Machine {
            online: online.to_vec(),
            measured: measured.to_vec(),
            virtual_machine: true,
            tracer,
        }
    }

    #[test]
    fn no_advice_names_a_cpu_list_the_kernel_refuses_or_trims() {
        let run = Tracer::Run(Decision::Live);
        let two = [0, 1];
        for m in [
            machine(&two, &two, run),
            machine(&two, &[1], run),
            machine(&two, &[0], run),
            machine(&two, &[1], Tracer::Watch),
            machine(&[0], &[0], run),
        ] {
            for (c, a) in every_advice(&m) {
                for cpus in lists(&a, "nohz_full=") {
                    // tick_nohz_init clears the boot CPU; an empty list isolates nothing.
                    assert!(
                        !cpus.is_empty() && !cpus.contains(&BOOT_CPU),
                        "{m:?} {c:?}: {a}"
                    );
                }
                for cpus in lists(&a, "isolcpus=") {
                    // housekeeping_setup keeps one online CPU out of the list.
                    let all = m.online.iter().all(|x| cpus.contains(x));
                    assert!(!cpus.is_empty() && !all, "{m:?} {c:?}: {a}");
                }
            }
        }
    }

    #[test]
    fn throttling_is_advised_by_the_held_threads_policy() {
        let m = machine(&[0, 1], &[0, 1], Tracer::Run(Decision::Live));
        let throttled = |policy| Culprit {
            class: CulpritClass::Throttled,
            who: Who::Throttled { policy },
        };
        for policy in [1, 2] {
            let a = advice(&throttled(policy), &[1], &m);
            assert!(
                a.contains("kernel.sched_rt_runtime_us=-1")
                    && a.contains("starves")
                    && a.contains("nohz_full=1")
                    && a.contains("SCHED_FIFO"),
                "{a}"
            );
        }
        for policy in [0, 3, 5] {
            let a = advice(&throttled(policy), &[1], &m);
            assert!(
                a.contains("cpu.max") && !a.contains("sched_rt_runtime_us"),
                "{a}"
            );
        }
    }

    #[test]
    fn every_cpu_measured_on_two_cpus_names_only_cpu_1() {
        let m = machine(&[0, 1], &[0, 1], Tracer::Run(Decision::Live));
        let tick = Culprit {
            class: CulpritClass::TimerTick,
            who: Who::Hrtimer {
                soft: false,
                callback: TimerCallback::Tick,
            },
        };
        let a = advice(&tick, &[1], &m);
        assert!(a.contains("nohz_full=1 "), "{a}");
        let sched = Culprit {
            class: CulpritClass::Softirq,
            who: Who::Softirq { vector: 7 },
        };
        let a = advice(&sched, &[1], &m);
        assert!(a.contains("isolcpus=domain,1"), "{a}");
    }

    #[test]
    fn a_setting_that_cannot_help_on_one_cpu_says_so() {
        let m = machine(
            &[0],
            &[0],
            Tracer::Run(Decision::AtEnd {
                chosen_by_default: true,
            }),
        );
        let tick = Culprit {
            class: CulpritClass::TimerTick,
            who: Who::Hrtimer {
                soft: false,
                callback: TimerCallback::Tick,
            },
        };
        let a = advice(&tick, &[0], &m);
        assert!(
            a.contains("nohz_full= cannot help here: this machine has one CPU"),
            "{a}"
        );
        let task = Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: "bash".into(),
                pid: 7,
                policy: 0,
                container: None,
            },
        };
        let a = advice(&task, &[0], &m);
        assert!(a.contains("only CPU: nothing can shield it"), "{a}");
    }

    #[test]
    fn a_watched_thread_on_cpu_1_is_advised_about_cpu_1() {
        // A watch of a thread pinned to CPU 1 of a 2-CPU machine: CPU 0 is free for the rest.
        let m = machine(&[0, 1], &[1], Tracer::Watch);
        let task = Culprit {
            class: CulpritClass::Task,
            who: Who::Task {
                comm: "bash".into(),
                pid: 7,
                policy: 0,
                container: None,
            },
        };
        let a = advice(&task, &[1], &m);
        assert!(!a.contains("nowhere"), "{a}");
        assert!(
            a.contains("isolcpus=1;") && a.contains("taskset -pc 0 <pid>"),
            "{a}"
        );
    }
}
