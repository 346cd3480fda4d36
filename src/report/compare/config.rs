//! `compare`'s "Configuration" section: what changed in the configured half of isolation
//! (`RunFile::config`) from the first run to each later one, each change followed by the
//! culprits that moved with it on the run's CPUs (their rate per second before → after).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::{Cpu, CulpritClass};
use crate::report::runfile::{CulpritEntry, RunFile};
use crate::system::config::{Configured, CpuConfig, CpusetConfig, IrqConfig, TasksAllowed};
use crate::units::format_list;

/// The culprits a setting governs: what should move when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Governs {
    /// The scheduler tick (`nohz_full`, `nohz=`, `CONFIG_HZ` …).
    Tick,
    /// Other tasks and kernel threads on a CPU (`isolcpus`, cpusets, affinities); None: on
    /// every CPU of the run.
    Tasks(Option<Cpu>),
    /// RCU callbacks: the RCU softirq and the `rcuc`/`rcuop` threads.
    Rcu,
    /// Device interrupts; Some: those IRQs only.
    Irqs(Option<Vec<u32>>),
    /// Unbound work: kworkers.
    UnboundWork,
    /// The vmstat refresh (`vm.stat_interval`).
    VmStat,
    /// Timer softirqs (`timer_migration`).
    Timers,
    /// NMIs (the NMI watchdog).
    Nmi,
    /// Frequency changes on a CPU (None: every CPU of the run).
    Frequency(Option<Cpu>),
    /// Nothing a probe sees moves with it alone.
    Nothing,
}

impl Governs {
    /// Whether `c`, seen on `cpu`, is governed by the setting. Rows are matched on their
    /// `who` (the culprit as data) and class.
    fn covers(&self, c: &CulpritEntry, cpu: Cpu) -> bool {
        let who = c.who.as_ref();
        let comm = who.and_then(|w| w.comm.as_deref()).unwrap_or("");
        match self {
            Governs::Tick => c.class == CulpritClass::TimerTick,
            Governs::Tasks(on) => {
                matches!(c.class, CulpritClass::Task | CulpritClass::Kthread)
                    && on.is_none_or(|o| o == cpu)
            }
            Governs::Rcu => {
                (c.class == CulpritClass::Softirq
                    && who.and_then(|w| w.softirq.as_deref()) == Some("RCU"))
                    || (c.class == CulpritClass::Kthread
                        && ["rcuc", "rcuop", "rcuog"]
                            .iter()
                            .any(|p| comm.starts_with(p)))
            }
            Governs::Irqs(irq) => {
                c.class == CulpritClass::Irq
                    && irq.as_ref().is_none_or(|irqs| {
                        who.and_then(|w| w.irq)
                            .is_some_and(|n| irqs.iter().any(|&i| u64::from(i) == n))
                    })
            }
            Governs::UnboundWork => c.class == CulpritClass::Kworker,
            Governs::VmStat => {
                c.class == CulpritClass::Kworker
                    && who.and_then(|w| w.function.as_deref()) == Some("vmstat_update")
            }
            Governs::Timers => {
                c.class == CulpritClass::Softirq
                    && who.and_then(|w| w.softirq.as_deref()) == Some("TIMER")
            }
            Governs::Nmi => c.class == CulpritClass::Nmi,
            Governs::Frequency(on) => {
                c.class == CulpritClass::FreqChange && on.is_none_or(|o| o == cpu)
            }
            Governs::Nothing => false,
        }
    }
}

/// One difference between two configurations: its words and what it governs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub text: String,
    pub governs: Governs,
}

/// Task counts allowed on a CPU differ between runs by a few as processes come and go; a
/// change is shown from this share of the larger count (a shield or an affinity change moves
/// most of them).
const TASKS_MOVED: f64 = 0.25;

/// Culprit rows shown after one change, the largest movers first.
const MOVED_SHOWN: usize = 4;

/// The section, or nothing for a single run.
pub(crate) fn section(
    runs: &[(String, RunFile)],
    label: impl Fn(&RunFile, usize) -> String,
) -> String {
    let mut s = String::new();
    if runs.len() < 2 {
        return s;
    }
    s.push_str("\n## Configuration (changes from #1)\n\n");
    for (path, r) in runs {
        if r.config.is_none() {
            let _ = writeln!(s, "- configuration not recorded in {path}");
        }
    }
    let (_, first) = &runs[0];
    let Some(base) = first.config.as_ref() else {
        return s;
    };
    let mut any = false;
    for (i, (_, r)) in runs.iter().enumerate().skip(1) {
        let Some(config) = r.config.as_ref() else {
            continue;
        };
        for change in changes(base, config) {
            any = true;
            let moved = moved_with(&change.governs, first, r);
            let _ = writeln!(
                s,
                "- {} → {}: {}{}",
                label(first, 0),
                label(r, i),
                change.text,
                if moved.is_empty() {
                    String::new()
                } else {
                    format!(": {}", moved.join("; "))
                }
            );
        }
    }
    if !any {
        s.push_str("the same configuration in every run that recorded it\n");
    }
    s
}

/// Every difference from `a` to `b`, in the order of the run file's keys.
pub(crate) fn changes(a: &Configured, b: &Configured) -> Vec<Change> {
    let mut d = Diffs::default();
    d.value(&Governs::Nothing, "kernel", &a.kernel, &b.kernel, |k| {
        k.clone()
    });
    boot(&mut d, a, b);
    let list = |l: &Option<Vec<Cpu>>| l.as_ref().map_or("unknown".into(), |l| cpus(l));
    d.value(
        &Governs::Tasks(None),
        "isolated CPUs",
        &a.isolated,
        &b.isolated,
        list,
    );
    d.value(
        &Governs::Tick,
        "nohz_full CPUs (kernel)",
        &a.nohz_full,
        &b.nohz_full,
        list,
    );
    kernel_config(&mut d, a, b);
    d.value(
        &Governs::UnboundWork,
        "workqueue cpumask",
        &a.workqueue_cpumask,
        &b.workqueue_cpumask,
        list,
    );
    sysctls(&mut d, a, b);
    for ca in &a.cpus {
        if let Some(cb) = b.cpu(ca.cpu) {
            per_cpu(&mut d, ca, cb);
        }
    }
    let flag = |v: &Option<bool>| match v {
        Some(true) => "on".to_string(),
        Some(false) => "off".to_string(),
        None => "unknown".to_string(),
    };
    d.value(&Governs::Nothing, "SMT", &a.smt_active, &b.smt_active, flag);
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    d.value(
        &Governs::Nothing,
        "hypervisor",
        &a.hypervisor,
        &b.hypervisor,
        opt,
    );
    irqs(&mut d, &a.irqs, &b.irqs);
    let running = |r: &bool| if *r { "running" } else { "not running" }.to_string();
    let (ia, ib) = (&a.irqbalance, &b.irqbalance);
    d.value(
        &Governs::Irqs(None),
        "irqbalance",
        &ia.running,
        &ib.running,
        running,
    );
    d.value(
        &Governs::Irqs(None),
        "irqbalance banned CPUs",
        &ia.banned,
        &ib.banned,
        |l| l.as_ref().map_or("not set".into(), |l| cpus(l)),
    );
    cpusets(&mut d, &a.cpusets, &b.cpusets);
    tasks_allowed(&mut d, &a.tasks_allowed, &b.tasks_allowed);
    let profile = |t: &Option<crate::system::config::Tuned>| {
        t.as_ref()
            .map_or("none".into(), |t| match &t.isolated_cores {
                Some(c) => format!("{} (isolated_cores={c})", t.profile),
                None => t.profile.clone(),
            })
    };
    d.value(
        &Governs::Nothing,
        "tuned profile",
        &a.tuned,
        &b.tuned,
        profile,
    );
    d.0
}

#[derive(Default)]
struct Diffs(Vec<Change>);

impl Diffs {
    /// `what before → after` when the two differ.
    fn value<T: PartialEq>(
        &mut self,
        governs: &Governs,
        what: &str,
        a: &T,
        b: &T,
        show: impl Fn(&T) -> String,
    ) {
        if a != b {
            self.push(governs, format!("{what} {} → {}", show(a), show(b)));
        }
    }

    fn push(&mut self, governs: &Governs, text: String) {
        self.0.push(Change {
            text,
            governs: governs.clone(),
        });
    }
}

fn cpus(list: &[Cpu]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        format_list(list)
    }
}

/// A boot parameter `name=value` added, removed or changed (`nohz_full=3 added`,
/// `isolcpus=domain,1-3 → domain,2-3`); a flag without value reads as its name.
fn boot(d: &mut Diffs, a: &Configured, b: &Configured) {
    let params = |c: &Configured| -> Vec<(String, String, Governs)> {
        let boot = &c.boot;
        let mut p = Vec::new();
        if let Some(i) = &boot.isolcpus {
            let value = format!("{},{}", i.flags.join(","), format_list(&i.cpus));
            p.push(("isolcpus".into(), value, Governs::Tasks(None)));
        }
        let lists = [
            ("nohz_full", &boot.nohz_full, Governs::Tick),
            ("rcu_nocbs", &boot.rcu_nocbs, Governs::Rcu),
            ("irqaffinity", &boot.irqaffinity, Governs::Irqs(None)),
        ];
        for (name, list, governs) in lists {
            if let Some(l) = list {
                p.push((name.into(), format_list(l), governs));
            }
        }
        for (name, value) in boot.others.iter().chain(&boot.unparsed) {
            p.push((name.clone(), value.clone(), other_governs(name)));
        }
        p
    };
    let (pa, pb) = (params(a), params(b));
    let written = |n: &str, v: &str| {
        if v.is_empty() {
            n.to_string()
        } else {
            format!("{n}={v}")
        }
    };
    for (name, va, governs) in &pa {
        match pb.iter().find(|(n, _, _)| n == name) {
            None => d.push(governs, format!("{} removed", written(name, va))),
            Some((_, vb, _)) if vb != va => {
                d.push(governs, format!("{} → {vb}", written(name, va)))
            }
            Some(_) => {}
        }
    }
    for (name, vb, governs) in &pb {
        if !pa.iter().any(|(n, _, _)| n == name) {
            d.push(governs, format!("{} added", written(name, vb)));
        }
    }
}

/// What a boot parameter of `boot.others` governs.
fn other_governs(name: &str) -> Governs {
    match name {
        "nohz" | "skew_tick" => Governs::Tick,
        "rcu_nocb_poll" => Governs::Rcu,
        "nmi_watchdog" | "nowatchdog" => Governs::Nmi,
        "intel_pstate" | "idle" | "intel_idle.max_cstate" | "processor.max_cstate" => {
            Governs::Frequency(None)
        }
        _ => Governs::Nothing,
    }
}

fn kernel_config(d: &mut Diffs, a: &Configured, b: &Configured) {
    let (ka, kb) = (&a.kernel_config, &b.kernel_config);
    let yn = |v: &Option<bool>| match v {
        Some(true) => "y".to_string(),
        Some(false) => "n".to_string(),
        None => "unknown".to_string(),
    };
    let num = |v: &Option<u32>| v.map_or("unknown".into(), |v| v.to_string());
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    d.value(
        &Governs::Tick,
        "CONFIG_NO_HZ_FULL",
        &ka.no_hz_full,
        &kb.no_hz_full,
        yn,
    );
    d.value(
        &Governs::Rcu,
        "CONFIG_RCU_NOCB_CPU",
        &ka.rcu_nocb_cpu,
        &kb.rcu_nocb_cpu,
        yn,
    );
    d.value(&Governs::Tick, "CONFIG_HZ", &ka.hz, &kb.hz, num);
    d.value(
        &Governs::Nothing,
        "preemption model",
        &ka.preempt,
        &kb.preempt,
        text,
    );
}

fn sysctls(d: &mut Diffs, a: &Configured, b: &Configured) {
    let (sa, sb) = (&a.sysctls, &b.sysctls);
    fn show<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map_or("unknown".into(), |v| v.to_string())
    }
    let flag = |v: &Option<bool>| v.map_or("unknown".into(), |v| u8::from(v).to_string());
    let list = |l: &Option<Vec<Cpu>>| l.as_ref().map_or("unknown".into(), |l| cpus(l));
    d.value(
        &Governs::VmStat,
        "vm.stat_interval",
        &sa.stat_interval,
        &sb.stat_interval,
        show,
    );
    let (ta, tb) = (&sa.timer_migration, &sb.timer_migration);
    d.value(&Governs::Timers, "kernel.timer_migration", ta, tb, flag);
    let (ra, rb) = (&sa.sched_rt_runtime_us, &sb.sched_rt_runtime_us);
    d.value(
        &Governs::Nothing,
        "kernel.sched_rt_runtime_us",
        ra,
        rb,
        show,
    );
    let (pa, pb) = (&sa.sched_rt_period_us, &sb.sched_rt_period_us);
    d.value(&Governs::Nothing, "kernel.sched_rt_period_us", pa, pb, show);
    let (wa, wb) = (&sa.watchdog_cpumask, &sb.watchdog_cpumask);
    d.value(&Governs::Nmi, "kernel.watchdog_cpumask", wa, wb, list);
    d.value(
        &Governs::Nmi,
        "kernel.nmi_watchdog",
        &sa.nmi_watchdog,
        &sb.nmi_watchdog,
        flag,
    );
}

fn per_cpu(d: &mut Diffs, a: &CpuConfig, b: &CpuConfig) {
    let cpu = a.cpu;
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    let freq = Governs::Frequency(Some(cpu));
    d.value(
        &freq,
        &format!("governor CPU {cpu}"),
        &a.governor,
        &b.governor,
        text,
    );
    let (fa, fb) = (&a.freq_driver, &b.freq_driver);
    d.value(&freq, &format!("cpufreq driver CPU {cpu}"), fa, fb, text);
    let (ia, ib) = (&a.idle_driver, &b.idle_driver);
    d.value(
        &Governs::Nothing,
        &format!("cpuidle driver CPU {cpu}"),
        ia,
        ib,
        text,
    );
    let states = |s: &Vec<crate::system::config::IdleState>| {
        let on: Vec<&str> = s
            .iter()
            .filter(|s| !s.disabled)
            .map(|s| s.name.as_str())
            .collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    };
    let (sa, sb) = (&a.idle_states, &b.idle_states);
    d.value(
        &Governs::Nothing,
        &format!("idle states enabled CPU {cpu}"),
        sa,
        sb,
        states,
    );
    let (ra, rb) = (&a.resume_latency_us, &b.resume_latency_us);
    d.value(
        &Governs::Nothing,
        &format!("PM QoS resume latency CPU {cpu}"),
        ra,
        rb,
        text,
    );
    let (ga, gb) = (&a.siblings, &b.siblings);
    d.value(
        &Governs::Nothing,
        &format!("SMT siblings of CPU {cpu}"),
        ga,
        gb,
        |l| cpus(l),
    );
}

/// IRQs given one change together (steering every IRQ off a CPU) read as one line from this
/// many; fewer are one line each.
const IRQS_GROUPED: usize = 3;

/// What changed in an IRQ and how (`("affinity", "0-1 → 0")`), shared by the IRQs it groups.
type IrqChange = (&'static str, String);

/// IRQs by number: affinity and effective affinity changes, IRQs added or gone. The IRQs that
/// share one change (`affinity 0-1 → 0`) are one line when there are `IRQS_GROUPED` or more.
fn irqs(d: &mut Diffs, a: &[IrqConfig], b: &[IrqConfig]) {
    let by = |l: &[IrqConfig]| -> BTreeMap<u32, IrqConfig> {
        l.iter().map(|i| (i.irq, i.clone())).collect()
    };
    let (ma, mb) = (by(a), by(b));
    let list = |l: &Option<Vec<Cpu>>| l.as_ref().map_or("unknown".into(), |l| cpus(l));
    let mut shared: Vec<(IrqChange, Vec<(u32, String)>)> = Vec::new();
    let mut add = |key: (&'static str, String), irq: u32, name: &str| match shared
        .iter_mut()
        .find(|(k, _)| *k == key)
    {
        Some((_, irqs)) => irqs.push((irq, name.to_string())),
        None => shared.push((key, vec![(irq, name.to_string())])),
    };
    for (n, ia) in &ma {
        match mb.get(n) {
            None => add(("gone", String::new()), *n, &ia.name),
            Some(ib) => {
                if ia.affinity != ib.affinity {
                    let change = format!("{} → {}", cpus(&ia.affinity), cpus(&ib.affinity));
                    add(("affinity", change), *n, &ib.name);
                }
                if ia.effective != ib.effective {
                    let change = format!("{} → {}", list(&ia.effective), list(&ib.effective));
                    add(("effective affinity", change), *n, &ib.name);
                }
            }
        }
    }
    for (n, ib) in mb.iter().filter(|(n, _)| !ma.contains_key(n)) {
        add(("added, affinity", cpus(&ib.affinity)), *n, &ib.name);
    }
    for ((what, change), irqs) in shared {
        let numbers: Vec<u32> = irqs.iter().map(|(n, _)| *n).collect();
        let tail = if change.is_empty() {
            what.to_string()
        } else {
            format!("{what} {change}")
        };
        if irqs.len() < IRQS_GROUPED {
            for (n, name) in irqs {
                d.push(
                    &Governs::Irqs(Some(vec![n])),
                    format!("IRQ {n} ({name}) {tail}"),
                );
            }
            continue;
        }
        let mut names: Vec<&str> = irqs.iter().map(|(_, name)| name.as_str()).collect();
        names.dedup();
        let shown = if names.len() > 4 {
            format!("{}, … {} more", names[..4].join(", "), names.len() - 4)
        } else {
            names.join(", ")
        };
        let text = format!(
            "{} IRQs {} ({shown}) {tail}",
            irqs.len(),
            format_list(&numbers)
        );
        d.push(&Governs::Irqs(Some(numbers)), text);
    }
}

/// cpusets by path: added, removed, their CPUs or partition changed.
fn cpusets(d: &mut Diffs, a: &[CpusetConfig], b: &[CpusetConfig]) {
    let governs = Governs::Tasks(None);
    for sa in a {
        match b.iter().find(|s| s.path == sa.path) {
            None => d.push(
                &governs,
                format!("cpuset {} removed (cpus {})", sa.path, cpus(&sa.cpus)),
            ),
            Some(sb) => {
                let what = format!("cpuset {}", sa.path);
                d.value(&governs, &format!("{what} cpus"), &sa.cpus, &sb.cpus, |l| {
                    cpus(l)
                });
                let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".into());
                let (pa, pb) = (&sa.partition, &sb.partition);
                d.value(&governs, &format!("{what} partition"), pa, pb, part);
            }
        }
    }
    for sb in b {
        if !a.iter().any(|s| s.path == sb.path) {
            d.push(
                &governs,
                format!("cpuset {} added (cpus {})", sb.path, cpus(&sb.cpus)),
            );
        }
    }
}

/// Tasks and kernel threads allowed on each CPU, when the count moved by `TASKS_MOVED`.
fn tasks_allowed(d: &mut Diffs, a: &[TasksAllowed], b: &[TasksAllowed]) {
    let moved = |x: u32, y: u32| {
        let (lo, hi) = (x.min(y), x.max(y));
        f64::from(hi - lo) >= TASKS_MOVED * f64::from(hi) && hi > lo
    };
    for ta in a {
        let Some(tb) = b.iter().find(|t| t.cpu == ta.cpu) else {
            continue;
        };
        // One line for both counts: they govern the same task rows.
        let mut parts = Vec::new();
        if moved(ta.tasks, tb.tasks) {
            parts.push(format!(
                "tasks allowed on CPU {} {} → {}",
                ta.cpu, ta.tasks, tb.tasks
            ));
        }
        if moved(ta.kthreads, tb.kthreads) {
            parts.push(format!(
                "kernel threads allowed on CPU {} {} → {}",
                ta.cpu, ta.kthreads, tb.kthreads
            ));
        }
        if !parts.is_empty() {
            d.push(&Governs::Tasks(Some(ta.cpu)), parts.join(", "));
        }
    }
}

/// The culprits a change governs whose rate on a CPU of `after`'s run differs from
/// `before`'s: `tick on CPU 3 250/s → 1/s`, the largest movers first.
fn moved_with(governs: &Governs, before: &RunFile, after: &RunFile) -> Vec<String> {
    if *governs == Governs::Nothing {
        return Vec::new();
    }
    let ra = rates(governs, before);
    let rb = rates(governs, after);
    let keys: std::collections::BTreeSet<&(String, Cpu)> = ra.keys().chain(rb.keys()).collect();
    let mut moved: Vec<(f64, String)> = keys
        .into_iter()
        .filter(|(_, cpu)| after.run.cpus.contains(cpu))
        .filter_map(|k| {
            let (x, y) = (
                ra.get(k).copied().unwrap_or(0.0),
                rb.get(k).copied().unwrap_or(0.0),
            );
            (rate(x) != rate(y)).then(|| {
                (
                    (x - y).abs(),
                    format!("{} on CPU {} {} → {}", k.0, k.1, rate(x), rate(y)),
                )
            })
        })
        .collect();
    moved.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    moved
        .into_iter()
        .take(MOVED_SHOWN)
        .map(|(_, s)| s)
        .collect()
}

/// Episodes per second of each governed culprit on each CPU of a run, by the culprit's name
/// (a task's without its pid: pids differ between runs).
fn rates(governs: &Governs, run: &RunFile) -> BTreeMap<(String, Cpu), f64> {
    let secs = run.run.duration_ns as f64 / 1e9;
    let mut m = BTreeMap::new();
    if secs <= 0.0 {
        return m;
    }
    for c in &run.culprits {
        let name = super::identity(c.class.as_str(), &c.name, &c.detail);
        let name = if name.2.is_empty() {
            name.1
        } else {
            format!("{} {}", name.1, name.2)
        };
        for t in c.cpus.iter().filter(|t| governs.covers(c, t.cpu)) {
            *m.entry((name.clone(), t.cpu)).or_insert(0.0) += t.episodes as f64 / secs;
        }
    }
    m
}

/// `250/s`, `0.5/s`, `0/s`.
fn rate(per_s: f64) -> String {
    let text = if per_s >= 10.0 {
        format!("{per_s:.0}")
    } else {
        format!("{per_s:.1}")
    };
    format!("{}/s", text.strip_suffix(".0").unwrap_or(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runfile::{tests as rf, CpuTheftEntry, WhoEntry};
    use crate::system::config::{BootParams, IrqConfig};

    /// A row of `class` named `name` with `episodes` on `cpu`.
    fn row(
        class: CulpritClass,
        name: &str,
        cpu: Cpu,
        episodes: u64,
        who: WhoEntry,
    ) -> CulpritEntry {
        let mut c = rf::culprit(class, name, episodes * 1_000);
        c.episodes = episodes;
        c.who = Some(who);
        c.cpus = vec![CpuTheftEntry {
            cpu,
            measured_ns: episodes * 1_000,
            episodes,
            ..CpuTheftEntry::default()
        }];
        c
    }

    fn before() -> Configured {
        Configured {
            kernel: "6.18.0".into(),
            workqueue_cpumask: Some(vec![0, 1, 2, 3]),
            sysctls: crate::system::config::Sysctls {
                stat_interval: Some(1),
                ..Default::default()
            },
            cpus: vec![CpuConfig {
                cpu: 1,
                governor: Some("ondemand".into()),
                ..Default::default()
            }],
            irqs: vec![IrqConfig {
                irq: 24,
                name: "virtio0-requests".into(),
                affinity: vec![0, 1],
                ..Default::default()
            }],
            tasks_allowed: vec![TasksAllowed {
                cpu: 1,
                tasks: 312,
                kthreads: 40,
                truncated: false,
            }],
            ..Default::default()
        }
    }

    fn after() -> Configured {
        let mut c = before();
        c.boot = BootParams {
            nohz_full: Some(vec![3]),
            ..Default::default()
        };
        c.workqueue_cpumask = Some(vec![0]);
        c.sysctls.stat_interval = Some(10);
        c.cpus[0].governor = Some("performance".into());
        c.irqs[0].affinity = vec![0];
        c.cpusets = vec![CpusetConfig {
            path: "/jitterscope-system".into(),
            cpus: vec![0],
            partition: Some("member".into()),
            exclusive: None,
        }];
        // A few tasks more is churn, not a change.
        c.tasks_allowed[0].tasks = 4;
        c.tasks_allowed[0].kthreads = 42;
        c
    }

    fn run(config: Option<Configured>, culprits: Vec<CulpritEntry>) -> RunFile {
        let mut r = rf::sample();
        r.run.duration_ns = 1_000_000_000;
        r.config = config;
        r.culprits = culprits;
        r
    }

    #[test]
    fn configuration_changes_with_the_culprits_that_moved() {
        let tick = |n| row(CulpritClass::TimerTick, "tick", 3, n, WhoEntry::default());
        let irq = WhoEntry {
            irq: Some(24),
            action: Some("virtio0-requests".into()),
            ..Default::default()
        };
        let flush = WhoEntry {
            worker: Some("kworker/1:1".into()),
            function: Some("wb_workfn".into()),
            ..Default::default()
        };
        let runs = vec![
            (
                "a.json".to_string(),
                run(
                    Some(before()),
                    vec![
                        tick(250),
                        row(CulpritClass::Irq, "virtio0-requests", 1, 41, irq),
                        row(CulpritClass::Kworker, "kworker/1:1", 1, 12, flush),
                    ],
                ),
            ),
            ("b.json".to_string(), run(Some(after()), vec![tick(1)])),
            ("c.json".to_string(), run(None, vec![])),
        ];
        let text = crate::report::compare::render(&runs);
        let lines: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("## Configuration"))
            .collect();
        let expected = [
            "## Configuration (changes from #1)",
            "",
            "- configuration not recorded in c.json",
            "- #1 x → #2 x: nohz_full=3 added: tick on CPU 3 250/s → 1/s",
            "- #1 x → #2 x: workqueue cpumask 0-3 → 0: kworker/1:1 on CPU 1 12/s → 0/s",
            "- #1 x → #2 x: vm.stat_interval 1 → 10",
            "- #1 x → #2 x: governor CPU 1 ondemand → performance",
            "- #1 x → #2 x: IRQ 24 (virtio0-requests) affinity 0-1 → 0: virtio0-requests on CPU 1 41/s → 0/s",
            "- #1 x → #2 x: cpuset /jitterscope-system added (cpus 0)",
            "- #1 x → #2 x: tasks allowed on CPU 1 312 → 4",
        ];
        assert_eq!(lines, expected, "{text}");
    }

    #[test]
    fn boot_parameters_changed_and_removed_read_as_written() {
        let mut a = Configured::default();
        a.boot.isolcpus = Some(crate::system::config::Isolcpus {
            flags: vec!["domain".into()],
            cpus: vec![1, 2, 3],
        });
        a.boot.others = vec![("nowatchdog".into(), String::new())];
        let mut b = a.clone();
        b.boot.isolcpus.as_mut().expect("isolcpus").cpus = vec![2, 3];
        b.boot.others.clear();
        let texts: Vec<String> = changes(&a, &b).into_iter().map(|c| c.text).collect();
        assert_eq!(
            texts,
            ["isolcpus=domain,1-3 → domain,2-3", "nowatchdog removed"]
        );
        assert!(changes(&a, &a).is_empty());
    }

    #[test]
    fn irqs_steered_together_read_as_one_line() {
        let irq = |irq: u32, name: &str, affinity: Vec<Cpu>| IrqConfig {
            irq,
            name: name.into(),
            affinity,
            ..Default::default()
        };
        let a = Configured {
            irqs: vec![
                irq(9, "acpi", vec![0, 1]),
                irq(24, "virtio0-config", vec![0, 1]),
                irq(25, "virtio0-input", vec![0, 1]),
                irq(26, "virtio0-output", vec![0, 1]),
                irq(30, "nvme0q1", vec![1]),
            ],
            ..Default::default()
        };
        let mut b = a.clone();
        for i in &mut b.irqs[..4] {
            i.affinity = vec![0];
        }
        b.irqs.pop();
        b.irqs.push(irq(31, "nvme0q2", vec![1]));
        let changes = changes(&a, &b);
        let texts: Vec<&str> = changes.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "4 IRQs 9,24-26 (acpi, virtio0-config, virtio0-input, virtio0-output) affinity 0-1 → 0",
                "IRQ 30 (nvme0q1) gone",
                "IRQ 31 (nvme0q2) added, affinity 1",
            ]
        );
        assert_eq!(changes[0].governs, Governs::Irqs(Some(vec![9, 24, 25, 26])));
    }

    #[test]
    fn no_configuration_anywhere_is_said_once_per_file() {
        let runs = vec![
            ("a.json".to_string(), run(None, vec![])),
            ("b.json".to_string(), run(None, vec![])),
        ];
        let text = crate::report::compare::render(&runs);
        assert!(
            text.contains(
                "- configuration not recorded in a.json\n- configuration not recorded in b.json\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("not recorded in a.json").count(), 1);
        let same = vec![
            ("a.json".to_string(), run(Some(before()), vec![])),
            ("b.json".to_string(), run(Some(before()), vec![])),
        ];
        let text = crate::report::compare::render(&same);
        assert!(
            text.contains("the same configuration in every run that recorded it"),
            "{text}"
        );
    }
}
