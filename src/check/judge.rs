//! Each promise of each checked CPU judged: what the configuration says (`Configured`) held
//! against what the CPU did (`CpuSeen`, and the kernel's own counters), with a verdict, the
//! reason in a sentence and the exact fixes for the CPUs given.
//!
//! The rule is one for every promise: culprits seen break it — `broken` where it was
//! configured, `not_configured` where nothing promised it; a quiet CPU holds it, whether or
//! not it was configured (the finding says which); `cannot_tell` where nothing was observable
//! (and says why).

use serde::{Deserialize, Serialize};

use super::observe::{CpuSeen, Promise, Seen};
use crate::model::{Cpu, Culprit, Nanos, TickDependency, TickStops, Who};
use crate::report::advice::{self, Machine};
use crate::system::config::Configured;
use crate::units::{cpumask_hex, fmt_ns, format_list};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Held,
    Broken,
    NotConfigured,
    CannotTell,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Held => "held",
            Verdict::Broken => "BROKEN",
            Verdict::NotConfigured => "not configured",
            Verdict::CannotTell => "cannot tell",
        }
    }
}

/// One promise of one CPU, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub cpu: Cpu,
    pub promise: Promise,
    pub verdict: Verdict,
    /// Whether the configuration promises it.
    pub configured: bool,
    /// What the configuration says, one fact a line.
    pub settings: Vec<String>,
    /// Events seen breaking it, and their own time (ns, measured by the probes or counted by
    /// the kernel as `how` says).
    pub count: u64,
    pub time_ns: Nanos,
    /// `measured` (the probes' records), `counted` (the kernel's counters), or `none`.
    pub how: How,
    /// The culprits seen, largest time first.
    pub seen: Vec<Seen>,
    /// Why the verdict, in a sentence.
    pub why: String,
    /// The fixes, most direct first, with this machine's CPU lists.
    pub fixes: Vec<String>,
    /// What would remain with the fixes applied, and why.
    pub remains: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    Measured,
    Counted,
    None,
}

/// The kernel's own counters of one CPU over the check (`system::counters`), where read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    /// Time no task ran (the check's length less the tasks' run time, `/proc/schedstat`).
    pub idle_ns: Option<Nanos>,
    /// Idle-state entries by state name (`cpuidle/stateN/usage`).
    pub idle_entries: Vec<(String, u64)>,
    /// Device interrupts delivered, by IRQ number (`/proc/interrupts`).
    pub irqs: Vec<(u32, u64)>,
    /// The counters' span (ns): a little longer than the probes' window.
    pub span_ns: Nanos,
}

/// What the checked tasks were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// A real-time (SCHED_FIFO/RR) thread held each CPU and never slept: the spinners of
    /// `--fifo`.
    pub rt_spinners: bool,
    /// jitterscope's spinners held each CPU (never idle but for what took it).
    pub spinners: bool,
}

/// Everything a judgement needs besides the promise.
pub struct Judge<'a> {
    pub config: &'a Configured,
    pub machine: &'a Machine,
    pub duration_ns: Nanos,
    pub checked: Checked,
    pub tick_stops: &'a [TickStops],
    /// The probes read the KVM steal clock (`ProbeSummary::steal_clock`).
    pub steal_clock: bool,
}

impl Judge<'_> {
    /// Every promise of the CPU, in `Promise::ALL` order.
    pub fn cpu(&self, seen: &CpuSeen, counted: &Counted) -> Vec<Finding> {
        Promise::ALL
            .iter()
            .map(|&p| self.promise(p, seen, counted))
            .collect()
    }

    fn promise(&self, p: Promise, seen: &CpuSeen, counted: &Counted) -> Finding {
        let cpu = seen.cpu;
        let rows = seen.of(p).to_vec();
        let mut f = Finding {
            cpu,
            promise: p,
            verdict: Verdict::Held,
            configured: false,
            settings: Vec::new(),
            count: rows.iter().map(|r| r.count).sum(),
            time_ns: rows.iter().map(|r| r.time_ns).sum(),
            how: How::Measured,
            seen: rows,
            why: String::new(),
            fixes: Vec::new(),
            remains: Vec::new(),
        };
        match p {
            Promise::NoOtherTasks => self.tasks(&mut f),
            Promise::TickStopped => self.tick(&mut f, seen),
            Promise::NoDeviceIrqs => self.irqs(&mut f, counted),
            Promise::NoUnboundWork => self.unbound(&mut f),
            Promise::NoPerCpuWork => self.per_cpu_work(&mut f),
            Promise::NoRcuCallbacks => self.rcu(&mut f),
            Promise::NoLoadBalancing => self.balancing(&mut f),
            Promise::NoCrossCpuInterrupts => self.cross_cpu(&mut f),
            Promise::NoRtThrottling => self.rt(&mut f, seen, counted),
            Promise::SteadyFrequency => self.frequency(&mut f, seen),
            Promise::NoDeepIdle => self.idle(&mut f, counted),
            Promise::NoHostPreemption => self.host(&mut f),
            Promise::QuietSibling => self.sibling(&mut f),
        }
        if f.verdict != Verdict::CannotTell {
            f.verdict = match (f.count > 0, f.configured) {
                (false, _) => Verdict::Held,
                (true, true) => Verdict::Broken,
                (true, false) => Verdict::NotConfigured,
            };
        }
        if f.why.is_empty() {
            f.why = self.default_why(&f);
        }
        if f.count == 0 {
            // A quiet promise needs no fix; a configured one would keep its settings.
            f.fixes.clear();
            f.remains.clear();
        }
        f
    }

    /// `12×/s, 1.1ms/s` of a finding over the check.
    fn rate(&self, count: u64, time_ns: Nanos) -> String {
        let secs = self.secs();
        format!(
            "{}/s, {}/s",
            per_second(count as f64 / secs),
            fmt_ns((time_ns as f64 / secs) as Nanos)
        )
    }

    fn default_why(&self, f: &Finding) -> String {
        let seen = match f.seen.first() {
            Some(top) if f.count > 0 => format!(
                "{} seen ({}); most: {}{}",
                plural(f.count, "event"),
                self.rate(f.count, f.time_ns),
                top.name,
                if top.detail.is_empty() {
                    String::new()
                } else {
                    format!(" {}", top.detail)
                }
            ),
            _ => format!("nothing seen in {}", fmt_ns(self.duration_ns)),
        };
        match (f.count > 0, f.configured) {
            (true, true) => format!("{seen}, though it was configured"),
            (true, false) => seen,
            (false, true) => format!("{seen}: configured, and it held"),
            (false, false) => {
                format!("{seen} (held by observation only: no setting promises it)")
            }
        }
    }

    /// The check's length in seconds (never zero: rates divide by it).
    fn secs(&self) -> f64 {
        (self.duration_ns as f64 / 1e9).max(1e-9)
    }

    fn hk(&self) -> Vec<Cpu> {
        self.machine.housekeeping()
    }

    fn checked_list(&self) -> String {
        format_list(&self.machine.measured)
    }

    /// The boot parameter `name=` with the CPUs the kernel accepts in it, or why it cannot help.
    fn boot(&self, name: &str, cpus: &[Cpu]) -> String {
        advice::boot_with(name, cpus, self.machine)
    }

    /// The fixes of the culprits seen (`report::advice`), each once.
    fn culprit_fixes(&self, f: &mut Finding) {
        for s in f.seen.iter().take(4) {
            let (Some(class), Some(who)) = (s.class, s.who.clone()) else {
                continue;
            };
            let text = advice::advice(&Culprit { class, who }, &[f.cpu], self.machine);
            if !f.fixes.contains(&text) {
                f.fixes.push(text);
            }
        }
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A rate per second, with the precision it deserves.
pub fn per_second(r: f64) -> String {
    if r >= 10.0 || r == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

fn has(list: &Option<Vec<Cpu>>, cpu: Cpu) -> bool {
    list.as_ref().is_some_and(|l| l.contains(&cpu))
}

fn list_or(list: &Option<Vec<Cpu>>, absent: &str) -> String {
    match list {
        None => absent.to_string(),
        Some(l) if l.is_empty() => "(empty)".to_string(),
        Some(l) => format_list(l),
    }
}

impl Judge<'_> {
    fn tasks(&self, f: &mut Finding) {
        let c = self.config;
        let cpu = f.cpu;
        let isolcpus = c.boot.isolcpus.as_ref();
        let domain = isolcpus.is_some_and(|i| {
            i.cpus.contains(&cpu) && (i.flags.is_empty() || i.flags.iter().any(|x| x == "domain"))
        });
        let isolated = has(&c.isolated, cpu);
        let partition = c.partition_holding(cpu);
        let fenced: Vec<&crate::system::config::CpusetConfig> = c
            .cpusets
            .iter()
            .filter(|s| s.path != "/" && !s.cpus.is_empty() && !s.cpus.contains(&cpu))
            .collect();
        f.configured = isolated || partition.is_some() || !fenced.is_empty();
        f.settings.push(match isolcpus {
            Some(i) => format!("isolcpus={}{}", flags(&i.flags), format_list(&i.cpus)),
            None => "isolcpus: not on the command line".into(),
        });
        f.settings.push(format!(
            "/sys/devices/system/cpu/isolated: {}",
            list_or(&c.isolated, "absent")
        ));
        if domain && !isolated {
            f.settings.push(format!(
                "isolcpus names CPU {cpu} but the kernel's isolated list does not: not effective"
            ));
        }
        match partition {
            Some(p) => f.settings.push(format!(
                "cpuset partition {} ({}): CPU {cpu} is its own",
                p.path,
                p.partition.as_deref().unwrap_or("")
            )),
            None => f
                .settings
                .push(format!("no cpuset partition holds CPU {cpu}")),
        }
        for s in fenced.iter().take(4) {
            f.settings.push(format!(
                "cpuset {} keeps its tasks on {}",
                s.path,
                format_list(&s.cpus)
            ));
        }
        if let Some(t) = c.tasks_allowed.iter().find(|t| t.cpu == cpu) {
            f.settings.push(format!(
                "{}{} tasks and {} kernel threads may run on CPU {cpu} (their affinity)",
                if t.truncated { "at least " } else { "" },
                t.tasks,
                t.kthreads
            ));
        }
        let hk = format_list(&self.hk());
        f.fixes.push(format!(
            "now: jitterscope tune --cpus {} --shield --hold (a cpuset of CPU {hk} for every movable task)",
            self.checked_list()
        ));
        f.fixes.push(format!(
            "persistently: systemctl set-property --runtime system.slice AllowedCPUs={hk} (and user.slice, init.scope), or a cgroup v2 partition: echo {} > /sys/fs/cgroup/<cg>/cpuset.cpus; echo isolated > /sys/fs/cgroup/<cg>/cpuset.cpus.partition",
            self.checked_list()
        ));
        f.fixes.push(format!(
            "{} (tuned: isolated_cores= in cpu-partitioning-variables.conf)",
            self.boot("isolcpus=domain,managed_irq,", &self.machine.isolcpus())
        ));
        f.remains.push(
            "per-CPU kernel threads (ksoftirqd, cpuhp, the CPU's kworkers) stay: they serve the CPU itself".into(),
        );
    }

    fn tick(&self, f: &mut Finding, seen: &CpuSeen) {
        let c = self.config;
        let cpu = f.cpu;
        let effective = has(&c.nohz_full, cpu);
        let on_cmdline = has(&c.boot.nohz_full, cpu);
        f.configured = effective || on_cmdline;
        f.settings.push(match &c.boot.nohz_full {
            Some(l) => format!("nohz_full={}", format_list(l)),
            None => "nohz_full: not on the command line".into(),
        });
        f.settings.push(format!(
            "/sys/devices/system/cpu/nohz_full: {}",
            list_or(&c.nohz_full, "absent (kernel without CONFIG_NO_HZ_FULL)")
        ));
        if let Some(v) = c.kernel_config.no_hz_full {
            f.settings.push(format!(
                "CONFIG_NO_HZ_FULL={} ({})",
                if v { "y" } else { "n" },
                c.kernel_config.source
            ));
        }
        // The tick's residual rate on a nohz_full CPU: at most one a second (the 1 Hz
        // maximum deferment, kernel/sched/core.c `sched_tick_offload` moves even that off).
        let secs = self.secs();
        let rate = seen.ticks as f64 / secs;
        if rate <= 1.5 {
            f.count = 0;
        }
        let kept = self.kept_by(cpu);
        let others = seen
            .of(Promise::NoOtherTasks)
            .iter()
            .map(|s| s.count)
            .sum::<u64>();
        f.why = match (f.count > 0, effective, on_cmdline) {
            (false, _, _) => format!(
                "{} ticks in {} ({}/s): the tick stopped{}",
                seen.ticks,
                fmt_ns(self.duration_ns),
                per_second(rate),
                if effective { "" } else { " (held by observation only: nohz_full is not configured)" }
            ),
            (true, false, true) => format!(
                "nohz_full names CPU {cpu} on the command line but the kernel's nohz_full list does not: not effective ({}); the tick ran {}/s",
                if c.kernel_config.no_hz_full == Some(false) { "the kernel is built without CONFIG_NO_HZ_FULL" } else { "the kernel dropped it: a list without housekeeping CPU, or a kernel without CONFIG_NO_HZ_FULL" },
                per_second(rate)
            ),
            (true, true, _) => format!(
                "nohz_full is on, yet the tick ran {}/s{}{}",
                per_second(rate),
                if kept.is_empty() { String::new() } else { format!("; the kernel kept it for: {kept}") },
                if others > 0 { format!("; other tasks ran here ({others} runs), and the tick stays while more than one task is runnable") } else { String::new() }
            ),
            (true, false, false) => format!(
                "the scheduler tick ran {}/s ({}/s of the CPU): without nohz_full the kernel stops the tick only in idle",
                per_second(rate),
                fmt_ns((f.time_ns as f64 / secs) as Nanos)
            ),
        };
        if c.kernel_config.no_hz_full == Some(false) {
            f.fixes
                .push("a kernel built with CONFIG_NO_HZ_FULL=y (this one has none)".into());
        }
        f.fixes.push(format!(
            "{} — removes the scheduler tick, {}/s here ({}/s), while one task runs",
            self.boot("nohz_full=", &self.machine.nohz_full()),
            per_second(rate),
            fmt_ns((f.time_ns as f64 / secs) as Nanos)
        ));
        if others > 0 {
            f.fixes.push("keep other tasks off the CPU (the tasks row): nohz_full keeps the tick while two tasks are runnable".into());
        }
        f.remains
            .push("a tick on each wake-up from idle and at each switch between tasks".into());
    }

    /// The kernel's reasons for keeping the tick on `cpu` (`timer:tick_stop`), in words.
    fn kept_by(&self, cpu: Cpu) -> String {
        let Some(t) = self.tick_stops.iter().find(|t| t.cpu == cpu) else {
            return String::new();
        };
        t.kept
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(d, n)| format!("{} ×{n}", dependency_words(*d)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn irqs(&self, f: &mut Finding, counted: &Counted) {
        let c = self.config;
        let cpu = f.cpu;
        let here: Vec<&crate::system::config::IrqConfig> = c
            .irqs
            .iter()
            .filter(|i| i.effective.as_ref().unwrap_or(&i.affinity).contains(&cpu))
            .collect();
        let boot_off = c
            .boot
            .irqaffinity
            .as_ref()
            .is_some_and(|l| !l.contains(&cpu));
        // No IRQ listed at all is /proc/interrupts unread, not a machine without IRQs.
        f.configured = (!c.irqs.is_empty() && here.is_empty()) || boot_off;
        f.settings.push(match &c.boot.irqaffinity {
            Some(l) => format!("irqaffinity={}", format_list(l)),
            None => "irqaffinity: not on the command line".into(),
        });
        if !here.is_empty() {
            let names: Vec<String> = here
                .iter()
                .take(6)
                .map(|i| {
                    format!(
                        "{} ({}{})",
                        i.irq,
                        i.name,
                        if i.managed == Some(true) {
                            ", kernel-managed"
                        } else if !i.affinity.contains(&cpu) {
                            // see the seen IRQs below: x86 moves an IRQ as it next fires
                            ", moved away, not yet fired since"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            f.settings.push(format!(
                "{} delivered to CPU {cpu}: {}{}",
                match here.len() {
                    1 => "1 IRQ is".to_string(),
                    n => format!("{n} IRQs are"),
                },
                names.join(", "),
                if here.len() > 6 { ", …" } else { "" }
            ));
        } else {
            f.settings
                .push(format!("no IRQ's effective affinity includes CPU {cpu}"));
        }
        f.settings
            .push(match (&c.irqbalance.banned, c.irqbalance.running) {
                (Some(b), r) => format!(
                    "irqbalance {}; banned CPUs {}",
                    if r { "running" } else { "not running" },
                    format_list(b)
                ),
                (None, true) => "irqbalance running, no banned CPUs: it may move IRQs back".into(),
                (None, false) => "irqbalance not running".into(),
            });
        for s in f.seen.clone() {
            let Some(number) = s.irq else { continue };
            if let Some((_, n)) = counted.irqs.iter().find(|(i, _)| u64::from(*i) == number) {
                f.settings.push(format!(
                    "IRQ {number}: the kernel counted {n} on CPU {cpu} over the check (/proc/interrupts; the probes saw {})",
                    s.count
                ));
            }
            let conf = c.irqs.iter().find(|i| u64::from(i.irq) == number);
            if let Some(i) = conf.filter(|i| !i.affinity.contains(&cpu)) {
                // x86 without interrupt remapping moves an IRQ when it next fires, and that
                // interrupt still lands where it was: until then its effective affinity
                // keeps the old CPU. One interrupt here from an IRQ whose move was pending
                // when the check began is that one; more is an affinity not obeyed.
                let pending = i.effective.as_ref().is_some_and(|e| e.contains(&cpu));
                f.settings.push(if pending && s.count <= 1 {
                    format!(
                        "IRQ {number} ({}) was moved to CPU {} but had not fired since: its next interrupt, seen here, still landed on CPU {cpu} (x86 moves an IRQ as it fires); the move is made now",
                        i.name,
                        format_list(&i.affinity)
                    )
                } else {
                    format!(
                        "IRQ {number} ({}) has smp_affinity_list {} yet ran on CPU {cpu}: its driver or controller ignores the affinity",
                        i.name,
                        format_list(&i.affinity)
                    )
                });
            }
            if conf.is_some_and(|i| i.managed == Some(true)) {
                f.remains.push(format!(
                    "IRQ {number} is kernel-managed: only {} moves it",
                    self.boot("isolcpus=managed_irq,", &self.machine.isolcpus())
                ));
            }
        }
        f.fixes.push(format!(
            "now: jitterscope tune --cpus {} --irqs --hold (every IRQ that allows it to CPU {})",
            self.checked_list(),
            format_list(&self.hk())
        ));
        self.culprit_fixes(f);
        f.fixes.push(format!(
            "boot with irqaffinity={}; {}",
            format_list(&self.hk()),
            self.boot("isolcpus=managed_irq,", &self.machine.isolcpus())
        ));
    }

    fn unbound(&self, f: &mut Finding) {
        let c = self.config;
        let cpu = f.cpu;
        f.configured = c
            .workqueue_cpumask
            .as_ref()
            .is_some_and(|m| !m.contains(&cpu));
        f.settings.push(format!(
            "workqueue cpumask: {}",
            list_or(
                &c.workqueue_cpumask,
                "unknown (no /sys/devices/virtual/workqueue/cpumask)"
            )
        ));
        let hk = self.hk();
        f.fixes.push(format!(
            "now: echo {} > /sys/devices/virtual/workqueue/cpumask (jitterscope tune --cpus {} --kworkers)",
            cpumask_hex(&hk),
            self.checked_list()
        ));
        f.fixes.push(format!(
            "boot with workqueue.unbound_cpus={} (or {}, which keeps unbound work on housekeeping CPUs)",
            format_list(&hk),
            self.boot("isolcpus=domain,", &self.machine.isolcpus())
        ));
    }

    fn per_cpu_work(&self, f: &mut Finding) {
        let c = self.config;
        let cpu = f.cpu;
        f.configured = has(&c.nohz_full, cpu);
        f.settings.push(match c.sysctls.stat_interval {
            Some(s) => format!("vm.stat_interval={s}"),
            None => "vm.stat_interval: unknown".into(),
        });
        f.settings.push(match c.sysctls.timer_migration {
            Some(t) => format!("kernel.timer_migration={}", u8::from(t)),
            None => "kernel.timer_migration: unknown".into(),
        });
        f.settings.push(format!(
            "nohz_full (defers per-CPU upkeep): {}",
            list_or(&c.nohz_full, "absent")
        ));
        self.culprit_fixes(f);
        if c.sysctls.stat_interval.is_some_and(|s| s < 10) {
            f.fixes.push("sysctl vm.stat_interval=10 (jitterscope tune --stat-interval 10): vmstat_update once in 10 s".into());
        }
        f.remains.push("work queued for this CPU by name (queue_work_on) runs here whatever the cpumask: only its source can stop".into());
    }

    fn rcu(&self, f: &mut Finding) {
        let c = self.config;
        let cpu = f.cpu;
        f.configured = has(&c.boot.rcu_nocbs, cpu) || has(&c.nohz_full, cpu);
        f.settings.push(match &c.boot.rcu_nocbs {
            Some(l) => format!("rcu_nocbs={}", format_list(l)),
            None => "rcu_nocbs: not on the command line".into(),
        });
        f.fixes.push(format!(
            "{} rcu_nocb_poll (callbacks run by rcuo threads on housekeeping CPUs)",
            self.boot("rcu_nocbs=", &self.machine.nohz_full())
        ));
        f.remains.push("an RCU softirq at each grace period the CPU must report, until nohz_full lets it stay quiescent".into());
    }

    fn balancing(&self, f: &mut Finding) {
        let c = self.config;
        let cpu = f.cpu;
        f.configured = has(&c.isolated, cpu)
            || c.cpusets
                .iter()
                .any(|s| s.cpus.contains(&cpu) && s.partition.as_deref() == Some("isolated"));
        f.settings.push(format!(
            "scheduler domains: {}",
            if has(&c.isolated, cpu) {
                format!("CPU {cpu} is isolated from them")
            } else {
                format!("CPU {cpu} balances with the others")
            }
        ));
        f.fixes.push(format!(
            "{}; or a cgroup v2 cpuset partition of type isolated holding CPU {}",
            self.boot("isolcpus=domain,", &self.machine.isolcpus()),
            self.checked_list()
        ));
        f.remains
            .push("the stopper thread (migration/N) for CPU hotplug and stop_machine".into());
    }

    fn cross_cpu(&self, f: &mut Finding) {
        f.configured = true;
        f.settings.push("no setting promises it: IPIs come from what other CPUs do (TLB shootdowns of a process spread over CPUs, wake-ups, irq_work) and NMIs from perf or the NMI watchdog".into());
        if let Some(w) = self.config.sysctls.nmi_watchdog {
            f.settings
                .push(format!("kernel.nmi_watchdog={}", u8::from(w)));
        }
        f.why = if f.count > 0 {
            format!(
                "{} seen ({}); no setting keeps them away: their senders do",
                plural(f.count, "IPI or NMI"),
                self.rate(f.count, f.time_ns)
            )
        } else {
            format!(
                "no IPI or NMI seen in {} (no setting promises it: nothing sent one)",
                fmt_ns(self.duration_ns)
            )
        };
        self.culprit_fixes(f);
    }

    fn rt(&self, f: &mut Finding, seen: &CpuSeen, counted: &Counted) {
        let s = &self.config.sysctls;
        f.configured = s.sched_rt_runtime_us == Some(-1);
        f.settings.push(match (s.sched_rt_runtime_us, s.sched_rt_period_us) {
            (Some(-1), _) => "kernel.sched_rt_runtime_us=-1 (RT throttling off)".into(),
            (Some(r), Some(p)) => format!("kernel.sched_rt_runtime_us={r} of sched_rt_period_us={p}: a real-time task may hold a CPU {:.0}% of each period", r as f64 * 100.0 / p.max(1) as f64),
            _ => "kernel.sched_rt_runtime_us: unknown".into(),
        });
        f.how = How::Counted;
        if !self.checked.rt_spinners {
            f.verdict = Verdict::CannotTell;
            f.how = How::None;
            f.why = "no real-time thread held the CPU: run check --fifo (SCHED_FIFO spinners) to see it".into();
            return;
        }
        // A SCHED_FIFO spinner that never sleeps loses its CPU to a normal task only through
        // the fair deadline server (Linux 6.12+: `fair_server`, 50 ms of each second by
        // default) or RT throttling, and leaves it idle only when throttled.
        let normal: Vec<&Seen> = seen
            .of(Promise::NoOtherTasks)
            .iter()
            .filter(|s| {
                matches!(
                    s.who,
                    Some(Who::Task {
                        policy: 0 | 3 | 5,
                        ..
                    })
                )
            })
            .collect();
        let by_normal: Nanos = normal.iter().map(|s| s.time_ns).sum();
        let idle = counted.idle_ns.unwrap_or(0);
        let secs = self.secs();
        // /proc/stat counts whole USER_HZ ticks (10 ms) at each end of the span: idle time
        // within two of them, plus a millisecond a second, is the counters' resolution.
        let idle = if idle as f64 > 20e6 + 1e6 * secs {
            idle
        } else {
            0
        };
        f.count = normal.iter().map(|s| s.count).sum::<u64>() + u64::from(idle > 0);
        f.time_ns = by_normal + idle;
        f.seen = normal.into_iter().cloned().collect();
        if idle > 0 {
            f.seen.push(Seen {
                name: "idle while the spinner was runnable (RT throttling)".into(),
                count: 1,
                time_ns: idle,
                longest_ns: idle,
                ..Default::default()
            });
        }
        if by_normal > 0 {
            f.how = How::Measured;
        }
        if f.count > 0 {
            f.why = format!(
                "the SCHED_FIFO spinner lost its CPU {}/s: {}/s to normal tasks (run by the fair deadline server, or RT throttling), {}/s idle{}",
                fmt_ns((f.time_ns as f64 / secs) as Nanos),
                fmt_ns((by_normal as f64 / secs) as Nanos),
                fmt_ns((idle as f64 / secs) as Nanos),
                if counted.idle_ns.is_none() { " (the idle time was not counted: /proc/stat unread)" } else { "" }
            );
            f.fixes.push("keep normal tasks off the CPU (the tasks row): the fair server runs only when one is runnable there".into());
            f.fixes.push(format!(
                "the fair server's share: echo 0 > /sys/kernel/debug/sched/fair_server/cpu{}/runtime (debugfs; Linux 6.12+) — the CPU's normal tasks, kworkers included, then wait for the spinner to sleep",
                f.cpu
            ));
        }
        f.fixes.push("sysctl kernel.sched_rt_runtime_us=-1 — only where nohz_full and isolation keep kernel threads off the CPU: a spinning RT task otherwise starves the CPU's own kernel threads".into());
    }

    fn frequency(&self, f: &mut Finding, seen: &CpuSeen) {
        let cpu = f.cpu;
        let conf = self.config.cpu(cpu);
        let governor = conf.and_then(|c| c.governor.clone());
        f.configured = governor.as_deref() == Some("performance");
        match (&governor, conf.and_then(|c| c.freq_driver.clone())) {
            (Some(g), d) => f.settings.push(format!(
                "governor {g}{}",
                d.map(|d| format!(" (driver {d})")).unwrap_or_default()
            )),
            (None, _) => {
                f.settings.push("no cpufreq driver".into());
                if seen.freq_changes == 0 {
                    f.verdict = Verdict::CannotTell;
                    f.how = How::None;
                    f.why = if self.config.virtual_machine {
                        "no cpufreq driver in this guest: the host sets the frequency, and a guest cannot see it change".into()
                    } else {
                        "no cpufreq driver: the firmware sets the frequency, unseen by the kernel"
                            .into()
                    };
                    return;
                }
            }
        }
        f.fixes.push(format!(
            "jitterscope tune --cpus {} --governor performance --hold (or cpupower -c {} frequency-set -g performance)",
            self.checked_list(),
            self.checked_list()
        ));
    }

    fn idle(&self, f: &mut Finding, counted: &Counted) {
        let conf = self.config.cpu(f.cpu);
        let states = conf.map(|c| c.idle_states.clone()).unwrap_or_default();
        let enabled: Vec<String> = states
            .iter()
            .filter(|s| !s.disabled && s.latency_us > 0)
            .map(|s| format!("{} ({} µs)", s.name, s.latency_us))
            .collect();
        f.configured = enabled.is_empty();
        f.settings.push(
            match (
                &conf.and_then(|c| c.idle_driver.clone()),
                enabled.is_empty(),
            ) {
                (None, _) => {
                    "no cpuidle driver: the CPU idles with HLT (a VM exit in a guest)".into()
                }
                (Some(d), true) => format!("cpuidle {d}: no state with an exit latency enabled"),
                (Some(d), false) => format!("cpuidle {d}: {} enabled", enabled.join(", ")),
            },
        );
        if let Some(q) = conf.and_then(|c| c.resume_latency_us.clone()) {
            f.settings.push(format!("pm_qos_resume_latency_us {q}"));
        }
        f.how = How::Counted;
        f.time_ns = 0;
        let stops = self.tick_stops.iter().find(|t| t.cpu == f.cpu);
        if !counted.idle_entries.is_empty() {
            f.count = counted.idle_entries.iter().map(|(_, n)| n).sum();
            f.seen = counted
                .idle_entries
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, n)| Seen {
                    name: format!("idle state {name}"),
                    count: *n,
                    ..Default::default()
                })
                .collect();
        } else if let Some(t) = stops.filter(|_| !has(&self.config.nohz_full, f.cpu)) {
            // No cpuidle states to count: on a CPU without nohz_full the tick stops only on
            // the way into idle, so its stops are idle entries (those long enough to stop it).
            f.how = How::Measured;
            f.count = t.stopped;
            if t.stopped > 0 {
                f.seen = vec![Seen {
                    name: "idle entries that stopped the tick (timer:tick_stop)".into(),
                    count: t.stopped,
                    ..Default::default()
                }];
            }
        } else {
            f.verdict = Verdict::CannotTell;
            f.how = How::None;
            f.why = "the kernel counts no idle entries here (no cpuidle states) and the tick's stops were not seen".into();
            return;
        }
        f.fixes.push(format!(
            "cpupower -c {} idle-set -D 0 (disable states with an exit latency), or hold /dev/cpu_dma_latency open at 0 while latency matters",
            self.checked_list()
        ));
        f.fixes.push("at boot: intel_idle.max_cstate=0 processor.max_cstate=1 (or idle=poll, at a power cost)".into());
    }

    fn host(&self, f: &mut Finding) {
        f.configured = true;
        if !self.config.virtual_machine {
            f.settings.push("bare metal".into());
            f.why = "bare metal: no host to preempt the CPU".into();
            return;
        }
        f.settings.push(format!(
            "a virtual machine{}",
            self.config
                .hypervisor
                .as_ref()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default()
        ));
        if !self.steal_clock {
            f.verdict = Verdict::CannotTell;
            f.how = How::None;
            f.why = "this guest has no steal clock: the host's preemption is invisible".into();
            return;
        }
        f.configured = false;
        f.settings
            .push("nothing in the guest configures it: the host's vCPU pinning does".into());
        if f.count > 0 {
            f.why = format!(
                "the host kept the vCPU off its physical CPU {} times ({}; the KVM steal clock)",
                f.count,
                self.rate(f.count, f.time_ns)
            );
        }
        self.culprit_fixes(f);
    }

    fn sibling(&self, f: &mut Finding) {
        let cpu = f.cpu;
        let siblings = self
            .config
            .cpu(cpu)
            .map(|c| c.siblings.clone())
            .unwrap_or_default();
        f.configured = true;
        if siblings.is_empty() {
            f.settings.push(match self.config.smt_active {
                Some(false) => "SMT off".into(),
                _ => format!("CPU {cpu} has no SMT sibling"),
            });
            f.why = "no SMT sibling: the core is the CPU's own".into();
            return;
        }
        let checked: Vec<Cpu> = siblings
            .iter()
            .copied()
            .filter(|s| self.machine.measured.contains(s))
            .collect();
        f.configured = checked.len() == siblings.len();
        f.settings.push(format!(
            "SMT sibling{} {}{}",
            if siblings.len() > 1 { "s" } else { "" },
            format_list(&siblings),
            if f.configured {
                " (checked too)"
            } else {
                " (not checked: its work shares this core)"
            }
        ));
        f.fixes.push(format!(
            "keep the sibling quiet too (check and isolate CPU {} with CPU {cpu}), or take it offline: echo 0 > /sys/devices/system/cpu/cpu{}/online; at boot: nosmt",
            format_list(&siblings),
            siblings[0]
        ));
    }
}

fn flags(f: &[String]) -> String {
    if f.is_empty() {
        String::new()
    } else {
        format!("{},", f.join(","))
    }
}

/// The kernel's reason for keeping the tick, in words.
pub fn dependency_words(d: TickDependency) -> &'static str {
    match d {
        TickDependency::PosixTimer => "a POSIX CPU timer",
        TickDependency::PerfEvents => "perf events",
        TickDependency::Sched => "the scheduler (more than one runnable task, or RT/deadline)",
        TickDependency::ClockUnstable => "an unstable clock",
        TickDependency::Rcu => "RCU",
        TickDependency::RcuExp => "an expedited RCU grace period",
        TickDependency::Other => "a reason this version does not name",
    }
}
