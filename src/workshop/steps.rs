//! `jitterscope workshop`: the perf-workshop's tuning steps with the same injected noise in
//! every step — BASELINE (unpinned), PINNED, SHIELDED, IRQS-MOVED, KWORKERS-MOVED, GOVERNOR —
//! each measured, its culprits named, and graded: is the culprit the step should expose found,
//! and is the one it should remove gone? Steps are cumulative, as in the tutorial; each is
//! run with its own journalled tuning, restored before the next.

use std::io::Write;

use anyhow::{Context, Result};

use super::noise::{steerable_irq, NoiseKind, NoiseSet};
use crate::model::{Cpu, CulpritClass};
use crate::report::runfile::{RunFile, WhoEntry};
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
    Boot,
}

impl Step {
    pub const ALL: [Step; 7] = [
        Step::Baseline,
        Step::Pinned,
        Step::Shielded,
        Step::IrqsMoved,
        Step::KworkersMoved,
        Step::Governor,
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
            Step::Boot => "BOOT",
        }
    }
}

/// One check of a step's grade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub passed: bool,
    pub text: String,
}

/// Time a culprit stole on `cpu` in a run, matched by class and who it is.
fn stolen(run: &RunFile, cpu: Cpu, class: CulpritClass, pick: &dyn Fn(&WhoEntry) -> bool) -> u64 {
    run.culprits
        .iter()
        .filter(|c| c.class == class && pick(&c.who()))
        .flat_map(|c| {
            c.cpus
                .iter()
                .filter(|x| x.cpu == cpu)
                .map(|x| x.measured_ns)
        })
        .sum()
}

/// Grades a step's run on the consumer CPU `cpu`.
pub fn grade(step: Step, run: &RunFile, cpu: Cpu, irq: Option<&(u32, String)>) -> Vec<Check> {
    let task = |r: &RunFile| {
        stolen(r, cpu, CulpritClass::Task, &|w| {
            w.comm.as_deref() == Some("js-noise-task")
        })
    };
    let irq_ns = |r: &RunFile| {
        irq.map_or(0, |(n, name)| {
            stolen(r, cpu, CulpritClass::Irq, &|w| {
                w.irq == Some(u64::from(*n)) && w.action.as_deref() == Some(name.as_str())
            })
        })
    };
    let kworker = |r: &RunFile| {
        stolen(r, cpu, CulpritClass::Kworker, &|w| {
            w.function.as_deref() == Some("refresh_vm_stats")
        })
    };
    let found = |what: &str, ns: u64| Check {
        passed: ns > 0,
        text: if ns > 0 {
            format!(
                "expected culprit {what} found on CPU {cpu} ({}) ✓",
                fmt_ns(ns)
            )
        } else {
            format!("expected culprit {what} NOT found on CPU {cpu} ✗")
        },
    };
    let gone = |what: &str, ns: u64, why: &str| Check {
        passed: ns == 0,
        text: if ns == 0 {
            format!("{what} is gone from CPU {cpu} ✓ ({why})")
        } else {
            format!(
                "{what} still on CPU {cpu} ({}) ✗ — {why} should have removed it",
                fmt_ns(ns)
            )
        },
    };
    let irq_name = irq.map_or("the device IRQ".to_string(), |(n, name)| {
        format!("IRQ {n} {name}")
    });
    match step {
        Step::Baseline | Step::Pinned => {
            let mut v = vec![found("task js-noise-task", task(run))];
            if irq.is_some() {
                v.push(found(&irq_name, irq_ns(run)));
            }
            v.push(found("kworker refresh_vm_stats", kworker(run)));
            v
        }
        Step::Shielded => {
            let mut v = vec![gone(
                "task js-noise-task",
                task(run),
                "the cpuset shield moved it",
            )];
            if irq.is_some() {
                v.push(found(&irq_name, irq_ns(run)));
            }
            v
        }
        Step::IrqsMoved => {
            let mut v = vec![gone(
                "task js-noise-task",
                task(run),
                "the shield still holds",
            )];
            if irq.is_some() {
                v.push(gone(&irq_name, irq_ns(run), "the IRQ affinity change"));
            }
            v
        }
        Step::KworkersMoved | Step::Governor => {
            let k = kworker(run);
            vec![Check {
                // refresh_vm_stats is queued on every CPU by name (schedule_on_each_cpu):
                // no cpumask moves it. The grade is that jitterscope says so, not that it left.
                passed: k > 0,
                text: if k > 0 {
                    format!("kworker refresh_vm_stats still on CPU {cpu} ({}) ✓ — expected: it is per-CPU work queued on every CPU, which the workqueue cpumask cannot move; only stopping the writes to /proc/sys/vm/stat_refresh removes it", fmt_ns(k))
                } else {
                    format!("kworker refresh_vm_stats not seen on CPU {cpu} ✗ (the noise should still reach it)")
                },
            }]
        }
        // Graded by `boot`: on the check and the advice, not on this run.
        Step::Boot => Vec::new(),
    }
}

/// Applies the tuning of every step up to and including `step` (cumulative).
pub(super) fn tune(
    t: &mut Tuner,
    step: Step,
    consumers: &[Cpu],
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<()> {
    if step >= Step::Shielded {
        let o = actions::shield(t, others).map_err(|e| anyhow::anyhow!("shielding: {e}"))?;
        for d in o.done.iter().chain(&o.refused) {
            writeln!(out, "  tuning: {d}")?;
        }
    }
    if step >= Step::IrqsMoved {
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
    if step >= Step::KworkersMoved {
        writeln!(out, "  tuning: {}", actions::workqueue_cpumask(t, others)?)?;
        writeln!(out, "  tuning: {}", actions::stat_interval(t, 10)?)?;
    }
    if step >= Step::Governor {
        let o = actions::governor(t, consumers, "performance");
        for d in o.done.iter().chain(&o.refused) {
            writeln!(out, "  tuning: {d}")?;
        }
    }
    Ok(())
}

/// Runs one step: noise on, tuning on, the measured run, noise off, tuning restored.
pub fn run_step(
    step: Step,
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<(RunFile, Vec<Check>)> {
    let consumer = base.workload.consumer_cpus[0];
    writeln!(out, "\n=== {} ===", step.title())?;
    let irq = steerable_irq();
    // Noise first (the IRQ is steered to the consumer CPU by the noise's own tuner), then
    // the step's tuning on top; they are undone in the opposite order.
    let mut specs = vec![
        (NoiseKind::Task, consumer, 100),
        (NoiseKind::Kworker, consumer, 200),
    ];
    if irq.is_some() {
        specs.push((NoiseKind::Irq, consumer, 100));
    }
    let noise = NoiseSet::start(&specs, others);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let result = (|| {
        let mut t = Tuner::new();
        tune(&mut t, step, &base.workload.consumer_cpus, others, out)?;
        let mut plan = base.clone();
        plan.workload.pin = step != Step::Baseline;
        plan.label = format!("{}-{}", base.label, step.title().to_lowercase());
        plan.progress = false;
        plan.tui = false;
        let mut sink: Vec<u8> = Vec::new();
        let outcome = session::run(plan, &mut sink).context("the step's run failed");
        // The next step runs in this process: what the run freed goes back first.
        crate::system::trim_memory();
        let outcome = outcome?;
        drop(t);
        Ok::<_, anyhow::Error>(outcome.run)
    })();
    for (kind, r) in noise.stop() {
        if let Err(e) = r {
            writeln!(out, "  noise {kind:?}: {e}")?;
        }
    }
    let run = result?;
    let h = &run.histograms[0].transit;
    writeln!(
        out,
        "  transit p50 {}  p99 {}  p99.99 {}  max {}  ({} messages{})",
        fmt_ns(h.percentile("50").unwrap_or(0)),
        fmt_ns(h.percentile("99").unwrap_or(0)),
        fmt_ns(h.percentile("99.99").unwrap_or(0)),
        fmt_ns(h.max),
        h.count,
        if run.run.settings.pinned {
            ""
        } else {
            ", unpinned"
        }
    )?;
    let on_cpu = |c: &crate::report::runfile::CulpritEntry| -> u64 {
        c.cpus
            .iter()
            .filter(|x| x.cpu == consumer)
            .map(|x| x.measured_ns)
            .sum()
    };
    let mut here: Vec<_> = run.culprits.iter().filter(|c| on_cpu(c) > 0).collect();
    here.sort_by_key(|c| std::cmp::Reverse(on_cpu(c)));
    for c in here.into_iter().take(5) {
        writeln!(
            out,
            "  culprit on CPU {consumer}: {} {}{}{} {}",
            c.class,
            c.name,
            if c.detail.is_empty() { "" } else { " " },
            c.detail,
            fmt_ns(on_cpu(c))
        )?;
    }
    let checks = grade(step, &run, consumer, irq.as_ref());
    for c in &checks {
        writeln!(out, "  {}", c.text)?;
    }
    Ok((run, checks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runfile::{tests as rf, CpuTheftEntry};

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
        let checks = grade(Step::Baseline, &run, 1, None);
        assert!(checks[0].passed, "{checks:?}");
        // A file written before `who` is matched by its words (`comm[pid]`).
        let old = rf::culprit(CulpritClass::Task, "js-noise-task[42]", 5_000);
        run.culprits = vec![on_cpu(old, 1)];
        assert!(grade(Step::Baseline, &run, 1, None)[0].passed);
        // Another command is not the noise task.
        let other = rf::culprit(CulpritClass::Task, "js-noise-taskx[42]", 5_000);
        run.culprits = vec![on_cpu(other, 1)];
        assert!(!grade(Step::Baseline, &run, 1, None)[0].passed);
    }
}
