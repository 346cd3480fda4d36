//! `jitterscope workshop`: the perf-workshop's tuning steps with the same injected noise in
//! every step — BASELINE (unpinned), PINNED, SHIELDED, IRQS-MOVED, KWORKERS-MOVED, GOVERNOR,
//! VM, BOOT (`boot`) — each step measured before and after each of its fixes, in its own runs, and graded on
//! those figures (`grade`). Fixes are cumulative, as in the tutorial; each step's are
//! journalled and restored before the next.

use std::io::Write;

use anyhow::{Context, Result};

use super::grade::{self, Check, Goal, Target};
use super::noise::{steerable_irq, NoiseKind, NoiseSet};
use crate::model::{Cpu, CulpritClass};
use crate::platform::input;
use crate::report::runfile::RunFile;
use crate::session::{self, RunPlan};
use crate::system::actions;
use crate::system::tuning::Tuner;
use crate::units::fmt_ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Step {
    Baseline,
    Pinned,
    Shielded,
    IrqsMoved,
    KworkersMoved,
    Governor,
    Rt,
    Vm,
    Boot,
}

impl Step {
    pub const ALL: [Step; 9] = [
        Step::Baseline,
        Step::Pinned,
        Step::Shielded,
        Step::IrqsMoved,
        Step::KworkersMoved,
        Step::Governor,
        Step::Rt,
        Step::Vm,
        Step::Boot,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Step::Baseline => "BASELINE",
            Step::Pinned => "PINNED",
            Step::Shielded => "SHIELDED",
            Step::IrqsMoved => "IRQS-MOVED",
            Step::KworkersMoved => "KWORKERS-MOVED",
            Step::Governor => "GOVERNOR",
            Step::Rt => "RT",
            Step::Vm => "VM",
            Step::Boot => "BOOT",
        }
    }

    /// This step's own fixes, each measured before and after.
    pub fn fixes(self) -> &'static [Fix] {
        match self {
            Step::Baseline | Step::Vm | Step::Boot => &[],
            Step::Pinned => &[Fix::Pin],
            Step::Shielded => &[Fix::Shield],
            Step::IrqsMoved => &[Fix::MoveIrqs],
            Step::KworkersMoved => &[Fix::StatInterval, Fix::WorkqueueCpumask],
            Step::Governor => &[Fix::Governor],
            Step::Rt => &[Fix::RtUnthrottled],
        }
    }

    /// The fixes in force before this step's own: every earlier step's that this machine
    /// can apply (`governs`: a cpufreq driver on the consumer's CPU), RT's excepted — it
    /// concerns a SCHED_FIFO consumer, which only the RT step runs.
    pub fn carried(self, governs: bool) -> Vec<Fix> {
        Step::ALL
            .iter()
            .filter(|s| **s < self && **s != Step::Rt && (**s != Step::Governor || governs))
            .flat_map(|s| s.fixes().iter().copied())
            .collect()
    }
}

/// One fix of the tutorial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    Pin,
    Shield,
    MoveIrqs,
    WorkqueueCpumask,
    StatInterval,
    Governor,
    RtUnthrottled,
}

impl Fix {
    fn title(self) -> &'static str {
        match self {
            Fix::Pin => "pinning",
            Fix::Shield => "the cpuset shield",
            Fix::MoveIrqs => "the IRQ affinity change",
            Fix::WorkqueueCpumask => "the workqueue cpumask",
            Fix::StatInterval => "vm.stat_interval=10",
            Fix::Governor => "the performance governor",
            Fix::RtUnthrottled => "kernel.sched_rt_runtime_us=-1",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Fix::Pin => "pinned",
            Fix::Shield => "shield",
            Fix::MoveIrqs => "irqs",
            Fix::WorkqueueCpumask => "wq-cpumask",
            Fix::StatInterval => "stat-interval",
            Fix::Governor => "governor",
            Fix::RtUnthrottled => "rt-runtime",
        }
    }

    /// What it should remove from the consumer's CPU.
    fn targets(self, irq: Option<&(u32, String)>) -> Vec<Target> {
        match self {
            Fix::Pin => vec![Target {
                what: "the consumer's stalls away from its CPU".into(),
                injected: false,
                goal: Goal::Remove,
                matcher: grade::Matcher::StallsElsewhere,
            }],
            Fix::Shield => vec![noise_task()],
            Fix::MoveIrqs => irq.map(|i| vec![injected_irq(i)]).unwrap_or_default(),
            Fix::WorkqueueCpumask => vec![Target::culprits(
                "unbound work (kworker/u*: the injected writeback's wb_workfn)",
                true,
                |c| c.class == CulpritClass::Kworker && c.name.starts_with("kworker/u"),
            )],
            Fix::StatInterval => vec![Target {
                goal: Goal::AtMost { per_s: 0.1 },
                ..kworker_function("vmstat_update", false)
            }],
            Fix::Governor => vec![Target::culprits("frequency changes", false, |c| {
                c.class == CulpritClass::FreqChange
            })],
            Fix::RtUnthrottled => vec![Target::culprits(
                "the SCHED_FIFO consumer throttled",
                true,
                |c| c.class == CulpritClass::Throttled,
            )],
        }
    }

    /// Applies it (pinning is the run's, not a setting).
    fn apply(
        self,
        t: &mut Tuner,
        consumers: &[Cpu],
        others: &[Cpu],
        out: &mut dyn Write,
    ) -> Result<()> {
        match self {
            Fix::Pin => writeln!(out, "  tuning: the workload's threads pinned to their CPUs")?,
            Fix::Shield => {
                let o =
                    actions::shield(t, others).map_err(|e| anyhow::anyhow!("shielding: {e}"))?;
                for d in o.done.iter().chain(&o.refused) {
                    writeln!(out, "  tuning: {d}")?;
                }
            }
            Fix::MoveIrqs => {
                let o = actions::move_irqs(t, others);
                writeln!(
                    out,
                    "  tuning: {} IRQs moved to CPU {}",
                    o.done.len(),
                    crate::system::cpus::format_list(others)
                )?;
                for r in &o.refused {
                    writeln!(out, "  tuning: not moved: {r}")?;
                }
            }
            Fix::WorkqueueCpumask => {
                writeln!(out, "  tuning: {}", actions::workqueue_cpumask(t, others)?)?
            }
            Fix::StatInterval => writeln!(out, "  tuning: {}", actions::stat_interval(t, 10)?)?,
            Fix::Governor => {
                let o = actions::governor(t, consumers, "performance");
                for d in o.done.iter().chain(&o.refused) {
                    writeln!(out, "  tuning: {d}")?;
                }
            }
            Fix::RtUnthrottled => {
                t.set(RT_RUNTIME, "-1")
                    .map_err(|e| anyhow::anyhow!("turning RT throttling off: {e}"))?;
                writeln!(out, "  tuning: kernel.sched_rt_runtime_us = -1 (RT throttling off; the consumer's CPU's own kernel threads now wait for it)")?;
            }
        }
        Ok(())
    }
}

/// RT throttling's budget: a real-time task may hold a CPU this many µs of each period.
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// `kernel.<name>` as the kernel says it ("?" when unreadable).
pub fn rt_setting(name: &str) -> String {
    input::read_proc(format!("/proc/sys/kernel/{name}"), input::PROC_FILE)
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// The SCHED_FIFO priority of the RT step's consumer (as `run --fifo` gives alone).
const RT_PRIORITY: u8 = 50;

fn noise_task() -> Target {
    Target::culprits("task js-noise-task", true, |c| {
        c.class == CulpritClass::Task && c.who().comm.as_deref() == Some("js-noise-task")
    })
}

fn injected_irq((n, name): &(u32, String)) -> Target {
    let (n, name) = (u64::from(*n), name.clone());
    Target::culprits(format!("IRQ {n} {name}"), true, move |c| {
        let w = c.who();
        c.class == CulpritClass::Irq && w.irq == Some(n) && w.action.as_deref() == Some(&name)
    })
}

fn kworker_function(function: &'static str, injected: bool) -> Target {
    Target::culprits(format!("kworker {function}"), injected, move |c| {
        c.class == CulpritClass::Kworker && c.who().function.as_deref() == Some(function)
    })
}

/// BASELINE's grade: every injected culprit named on the consumer's CPU.
pub fn found(run: &RunFile, cpu: Cpu, irq: Option<&(u32, String)>) -> Vec<Check> {
    let mut expected = vec![noise_task()];
    expected.extend(irq.map(injected_irq));
    // The unbound writeback is not among them: unbound work runs wherever the scheduler puts
    // it, so nothing makes it reach this CPU before its step (KWORKERS-MOVED grades it there).
    expected.push(kworker_function("refresh_vm_stats", true));
    expected
        .iter()
        .map(|t| {
            let a = t.measure(run, cpu);
            Check::new(
                a.ns > 0,
                if a.ns > 0 {
                    format!(
                        "expected culprit {} found on CPU {cpu} ({} in {}×) ✓",
                        t.what,
                        fmt_ns(a.ns),
                        a.count
                    )
                } else {
                    format!("expected culprit {} NOT found on CPU {cpu} ✗", t.what)
                },
            )
        })
        .collect()
}

/// A step's runs: before its fixes, then after each (the last is the step's result).
pub struct StepRuns {
    pub runs: Vec<RunFile>,
    pub checks: Vec<Check>,
}

/// The noise every step injects on the consumer's CPU (injections per second). The RT step
/// leaves out the stat_refresh kworkers: each write waits for a kworker on every CPU, which an
/// unthrottled SCHED_FIFO consumer starves until its run ends.
fn noise_specs(step: Step, consumer: Cpu, irq: bool) -> Vec<(NoiseKind, Cpu, u32)> {
    let mut specs = vec![
        (NoiseKind::Task, consumer, 100),
        (NoiseKind::Writeback, consumer, 50),
    ];
    if step != Step::Rt {
        specs.push((NoiseKind::Kworker, consumer, 200));
    }
    if irq {
        specs.push((NoiseKind::Irq, consumer, 100));
    }
    specs
}

/// Runs one step: noise on, the earlier steps' fixes, a run, then each of this step's fixes
/// and a run after it; the noise stopped and every setting restored, also on failure.
pub fn run_step(
    step: Step,
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<StepRuns> {
    let consumer = base.workload.consumer_cpus[0];
    writeln!(out, "\n=== {} ===", step.title())?;
    let irq = steerable_irq();
    // Noise first (the IRQ is steered to the consumer CPU by the noise's own tuner), then the
    // tuning on top; they are undone in the opposite order.
    let noise = NoiseSet::start(&noise_specs(step, consumer, irq.is_some()), others);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let result = measure_step(step, base, others, out);
    for (kind, r) in noise.stop() {
        if let Err(e) = r {
            writeln!(out, "  noise {kind:?}: {e}")?;
        }
    }
    let runs = result?;
    let checks = grade_step(step, &runs, consumer, irq.as_ref(), out)?;
    Ok(StepRuns { runs, checks })
}

/// The step's runs, with its tuning held (restored when this returns).
fn measure_step(
    step: Step,
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<Vec<RunFile>> {
    let consumers = base.workload.consumer_cpus.clone();
    if step == Step::Rt {
        writeln!(
            out,
            "  the consumer runs SCHED_FIFO priority {RT_PRIORITY}; kernel.sched_rt_runtime_us={} of sched_rt_period_us={}",
            rt_setting("sched_rt_runtime_us"),
            rt_setting("sched_rt_period_us")
        )?;
    }
    let mut t = Tuner::new();
    let carried = apply_carried(&mut t, step, &consumers, others)?;
    if !carried.is_empty() {
        let names: Vec<&str> = carried.iter().map(|f| f.title()).collect();
        writeln!(
            out,
            "  in force from the steps before: {}",
            names.join(", ")
        )?;
    }
    let mut pinned = carried.contains(&Fix::Pin);
    let fixes = step.fixes();
    let before = if fixes.is_empty() { "" } else { "-before" };
    let mut runs = vec![one_run(base, step, before, pinned)?];
    for fix in fixes {
        if runs
            .last()
            .is_some_and(|r| r.run.ended != crate::model::Ended::Completed)
        {
            break;
        }
        fix.apply(&mut t, &consumers, others, out)?;
        pinned |= *fix == Fix::Pin;
        let after = if fixes.len() == 1 {
            "-after".to_string()
        } else {
            format!("-after-{}", fix.slug())
        };
        runs.push(one_run(base, step, &after, pinned)?);
    }
    drop(t);
    Ok(runs)
}

/// Whether `cpu` has a cpufreq driver (the GOVERNOR step's fix applies there).
pub fn has_cpufreq(cpu: Cpu) -> bool {
    std::path::Path::new(&format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq")).exists()
}

/// Applies, through `t`, the fixes of every step before `step` that this machine can apply
/// (the governor only with a cpufreq driver on the consumer's CPU); which they were.
pub(super) fn apply_carried(
    t: &mut Tuner,
    step: Step,
    consumers: &[Cpu],
    others: &[Cpu],
) -> Result<Vec<Fix>> {
    let carried = step.carried(has_cpufreq(consumers[0]));
    for fix in &carried {
        fix.apply(t, consumers, others, &mut std::io::sink())?;
    }
    Ok(carried)
}

/// One measured run of a step.
fn one_run(base: &RunPlan, step: Step, tag: &str, pinned: bool) -> Result<RunFile> {
    let mut plan = base.clone();
    plan.workload.pin = pinned;
    if step == Step::Rt {
        plan.workload.consumer_fifo = Some(RT_PRIORITY);
    }
    plan.label = format!("{}-{}{tag}", base.label, step.title().to_lowercase());
    plan.progress = false;
    plan.tui = false;
    let mut sink: Vec<u8> = Vec::new();
    let outcome = session::run(plan, &mut sink).context("the step's run failed");
    // The next run is in this process: what the run freed goes back first.
    crate::system::trim_memory();
    Ok(outcome?.run)
}

/// The transit percentiles of the step's runs, side by side.
fn transit_line(runs: &[RunFile]) -> String {
    let of = |p: &str| {
        runs.iter()
            .map(|r| fmt_ns(r.histograms[0].transit.percentile(p).unwrap_or(0)))
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let max = runs
        .iter()
        .map(|r| fmt_ns(r.histograms[0].transit.max))
        .collect::<Vec<_>>()
        .join(" → ");
    let unpinned = match (runs[0].run.settings.pinned, runs.len()) {
        (true, _) => "",
        (false, 1) => ", unpinned",
        (false, _) => "; the first run unpinned",
    };
    format!(
        "transit p99 {}  p99.99 {}  max {}  ({} messages{unpinned})",
        of("99"),
        of("99.99"),
        max,
        runs.iter()
            .map(|r| r.histograms[0].transit.count.to_string())
            .collect::<Vec<_>>()
            .join(" → ")
    )
}

/// Prints and grades the step's runs on the consumer's CPU.
fn grade_step(
    step: Step,
    runs: &[RunFile],
    consumer: Cpu,
    irq: Option<&(u32, String)>,
    out: &mut dyn Write,
) -> Result<Vec<Check>> {
    writeln!(out, "  {}", transit_line(runs))?;
    let last = runs.last().expect("a step has a run");
    let mut checks = Vec::new();
    let mut targets = Vec::new();
    match step {
        Step::Baseline => checks = found(last, consumer, irq),
        Step::Vm => checks = super::vm::grade(last, consumer, out)?,
        _ => {
            // A run that ended early ends the step: only the fixes with a run after them.
            let graded = runs.len().saturating_sub(1);
            for (i, fix) in step.fixes().iter().enumerate().take(graded) {
                for t in fix.targets(irq) {
                    checks.push(grade::across(
                        &t,
                        fix.title(),
                        &runs[i],
                        &runs[i + 1],
                        consumer,
                    ));
                    targets.push(t);
                }
            }
        }
    }
    for line in grade::remains(last, consumer, &targets, 8) {
        writeln!(out, "  {line}")?;
    }
    for c in &checks {
        writeln!(out, "  {}", c.text)?;
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runfile::{tests as rf, CpuTheftEntry, WhoEntry};

    fn on_cpu(
        mut c: crate::report::runfile::CulpritEntry,
        cpu: Cpu,
    ) -> crate::report::runfile::CulpritEntry {
        c.cpus = vec![CpuTheftEntry {
            cpu,
            measured_ns: c.measured_ns,
            ..CpuTheftEntry::default()
        }];
        c
    }

    #[test]
    fn culprits_are_matched_by_who_they_are_not_by_their_words() {
        // A row whose words name it otherwise (one command's processes as one row): its
        // `who` still says the task.
        let mut task = rf::culprit(CulpritClass::Task, "js-noise-task — 3 tasks", 5_000);
        task.who = Some(WhoEntry {
            comm: Some("js-noise-task".into()),
            ..WhoEntry::default()
        });
        let mut run = rf::sample();
        run.culprits = vec![on_cpu(task, 1)];
        let checks = found(&run, 1, None);
        assert!(checks[0].passed, "{checks:?}");
        // A file written before `who` is matched by its words (`comm[pid]`).
        let old = rf::culprit(CulpritClass::Task, "js-noise-task[42]", 5_000);
        run.culprits = vec![on_cpu(old, 1)];
        assert!(found(&run, 1, None)[0].passed);
        // Another command is not the noise task.
        let other = rf::culprit(CulpritClass::Task, "js-noise-taskx[42]", 5_000);
        run.culprits = vec![on_cpu(other, 1)];
        assert!(!found(&run, 1, None)[0].passed);
    }
}
