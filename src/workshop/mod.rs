//! The workshop: known noise, injected on purpose, so that each tuning step has a culprit to
//! find and then remove (`noise`, `steps`), each fix graded on the step's own before → after
//! runs (`grade`, and `vm` for a guest's host share), the BOOT step and its after-reboot
//! comparison (`boot`), and `run`, the whole course of steps.

pub mod boot;
pub mod grade;
pub mod noise;
pub mod steps;
pub mod vm;

use std::io::Write;

use anyhow::Result;

use crate::model::{Cpu, Decision, Nanos};
use crate::report::files::OutputDir;
use crate::report::runfile::RunFile;
use crate::session::RunPlan;
use crate::system::cpus::Topology;
use crate::system::tuning::restore_leftovers;
use crate::units::format_list;
use crate::workload::{auto_stall_threshold_ns, WorkloadConfig};
use steps::{run_step, Step};

/// What `jitterscope workshop` runs: one producer and one consumer CPU (the noise goes to the
/// consumer's), every step or one, each recorded for `duration_ns`.
#[derive(Debug, Clone)]
pub struct WorkshopConfig {
    pub producer_cpu: Cpu,
    pub consumer_cpu: Cpu,
    /// Only this step (the fixes of the steps before it are applied too); None: all.
    pub step: Option<Step>,
    pub duration_ns: Nanos,
    pub output: OutputDir,
    /// `--after-reboot`: the BOOT step's run file saved before the reboot, and one measured
    /// after it (when absent, the step measures now). Empty: the steps run.
    pub after_reboot: Vec<std::path::PathBuf>,
}

/// The steps' runs and how many of their checks passed.
#[derive(Default)]
struct Course {
    runs: Vec<(String, RunFile)>,
    passed: usize,
    total: usize,
}

/// `jitterscope workshop`: each step measured and graded, then the steps side by side; an
/// error (exit 1) when a check failed.
pub fn run(cfg: &WorkshopConfig, out: &mut dyn Write) -> Result<()> {
    let topo = Topology::read();
    let others = topo.housekeeping(&[cfg.consumer_cpu]);
    restore_leftovers();
    let every_cpu_measured = topo
        .housekeeping(&[cfg.producer_cpu, cfg.consumer_cpu])
        .is_empty();
    let decision =
        crate::session::decision_by_default(true, false, every_cpu_measured, cfg.duration_ns);
    let base = base_plan(cfg, decision);
    if !cfg.after_reboot.is_empty() {
        return boot::after_reboot(&cfg.after_reboot, &base, &others, out);
    }
    introduce(cfg, &others, topo.online.len(), out)?;
    let course = run_steps(cfg, &base, &others, out)?;
    if course.runs.len() > 1 {
        writeln!(out, "\n{}", crate::report::compare::render(&course.runs))?;
    }
    let (passed, total) = (course.passed, course.total);
    writeln!(out, "\nworkshop: {passed} of {total} checks passed")?;
    if passed < total {
        anyhow::bail!(
            "{} of {total} workshop checks failed (see above)",
            total - passed
        );
    }
    Ok(())
}

/// The run every step starts from: probes on, no terminal UI, the automatic stall threshold.
/// As a run's default (`--attribution auto`), the culprits are decided after each step's
/// workload stops when every CPU is measured (`decision`): nothing is shown while a step runs,
/// and its checks read the report.
fn base_plan(cfg: &WorkshopConfig, decision: Decision) -> RunPlan {
    let mut workload = WorkloadConfig::new(cfg.producer_cpu, vec![cfg.consumer_cpu]);
    workload.duration_ns = cfg.duration_ns;
    workload.warmup_ns = 500_000_000;
    workload.stall_threshold_ns = auto_stall_threshold_ns();
    if decision.at_end() {
        workload.hold_for_the_end();
    }
    RunPlan {
        workload,
        label: "workshop".into(),
        output: cfg.output.clone(),
        stall_threshold_auto: true,
        keep_stalls: 200,
        progress: false,
        tui: false,
        colour: false,
        probes: Some(8 << 20),
        metrics: None,
        decision,
    }
}

/// Which CPU gets what, and what a 2-CPU machine cannot clear.
fn introduce(
    cfg: &WorkshopConfig,
    others: &[Cpu],
    online_cpus: usize,
    out: &mut dyn Write,
) -> Result<()> {
    let (producer, consumer) = (cfg.producer_cpu, cfg.consumer_cpu);
    writeln!(
        out,
        "workshop: producer CPU {producer}, consumer CPU {consumer}; noise on CPU {consumer}: a competing task, stat_refresh kworkers, unbound writeback work{}; fixes go to CPU {}",
        if noise::steerable_irq().is_some() { ", the virtio-rng IRQ" } else { "" },
        format_list(others)
    )?;
    if online_cpus <= 2 {
        writeln!(out, "note: with 2 CPUs the producer shares CPU {producer} with the rest of the system: shielding, IRQ and workqueue steering clear the consumer's CPU only")?;
    }
    Ok(())
}

/// The steps in order, until one's run ends early (a signal, a lost CPU).
fn run_steps(
    cfg: &WorkshopConfig,
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<Course> {
    let steps: Vec<Step> = match cfg.step {
        Some(s) => vec![s],
        None => Step::ALL.to_vec(),
    };
    let mut course = Course::default();
    for step in steps {
        if step == Step::Governor && !steps::has_cpufreq(cfg.consumer_cpu) {
            writeln!(out, "\n=== GOVERNOR ===\n  skipped: no cpufreq driver on CPU {} (a VM, or a driver-less machine): the frequency is the host's or firmware's to set", cfg.consumer_cpu)?;
            continue;
        }
        if step == Step::Rt && steps::rt_setting("sched_rt_runtime_us") == "-1" {
            writeln!(out, "\n=== RT ===\n  skipped: RT throttling is already off here (kernel.sched_rt_runtime_us=-1): nothing throttles a SCHED_FIFO consumer")?;
            continue;
        }
        if step == Step::Vm
            && !crate::system::config::Configured::read(
                &crate::system::config::Root::live(),
                &[cfg.consumer_cpu],
            )
            .virtual_machine
        {
            writeln!(out, "\n=== VM ===\n  skipped: not a guest (no hypervisor CPU flag): no host shares these CPUs")?;
            continue;
        }
        let (run, checks) = if step == Step::Boot {
            boot::run_step(base, others, out)?
        } else {
            let step_runs = run_step(step, base, others, out)?;
            let Some(run) = step_runs.runs.into_iter().next_back() else {
                continue;
            };
            (run, step_runs.checks)
        };
        let interrupted = run.run.ended != crate::model::Ended::Completed;
        course.passed += checks.iter().filter(|c| c.counted && c.passed).count();
        course.total += checks.iter().filter(|c| c.counted).count();
        course.runs.push((step.title().to_string(), run));
        if interrupted {
            writeln!(out, "\nworkshop: stopped after step {} (the run ended early); the steps after it did not run", step.title())?;
            break;
        }
    }
    Ok(course)
}
