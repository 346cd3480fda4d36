//! A step's grade, from its own runs: what each fix should remove from the consumer's CPU,
//! measured in the run before the fix and the run after it (the same noise in both), and what
//! remains there with why. A fix passes when what it can remove is gone or down by at least
//! 90 %; what no fix of the step can remove is listed as *remains*, never as a pass.

use crate::model::{CulpritClass, Nanos};
use crate::report::runfile::{CulpritEntry, RunFile};
use crate::units::fmt_ns;

/// Time and episodes on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amount {
    pub ns: Nanos,
    pub count: u64,
}

impl Amount {
    fn text(self) -> String {
        if self.count == 0 && self.ns == 0 {
            "none".into()
        } else {
            format!("{} in {}×", fmt_ns(self.ns), self.count)
        }
    }
}

/// What a target is matched on in a run.
pub enum Matcher {
    /// Culprit rows, by who they are.
    Culprits(Box<dyn Fn(&CulpritEntry) -> bool>),
    /// The consumer's kept stalls on a CPU other than its own (it was not held there).
    StallsElsewhere,
}

/// What the goal of a fix is for one target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// Gone, or down by at least 90 %.
    Remove,
    /// At most `per_s` episodes a second, plus one armed before the change (a periodic
    /// timer's interval only takes effect at its next expiry).
    AtMost { per_s: f64 },
}

/// One thing a fix should remove (or space out) on the consumer's CPU.
pub struct Target {
    pub what: String,
    /// Injected on purpose: absent before the fix means the noise did not reach the CPU, and
    /// the fix showed nothing — a failure, not a pass.
    pub injected: bool,
    pub goal: Goal,
    pub matcher: Matcher,
}

impl Target {
    pub fn culprits(
        what: impl Into<String>,
        injected: bool,
        pick: impl Fn(&CulpritEntry) -> bool + 'static,
    ) -> Target {
        Target {
            what: what.into(),
            injected,
            goal: Goal::Remove,
            matcher: Matcher::Culprits(Box::new(pick)),
        }
    }

    /// Its amount on `cpu` in `run`.
    pub fn measure(&self, run: &RunFile, cpu: crate::model::Cpu) -> Amount {
        match &self.matcher {
            Matcher::Culprits(pick) => on_cpu(run, cpu, |c| pick(c)),
            Matcher::StallsElsewhere => {
                let elsewhere: Vec<_> = run
                    .stalls
                    .iter()
                    .filter(|s| s.thread != "producer" && s.cpu != cpu)
                    .collect();
                Amount {
                    ns: elsewhere.iter().map(|s| s.duration_ns).sum(),
                    count: elsewhere.len() as u64,
                }
            }
        }
    }

    /// Its name on `cpu`, as a grade line starts.
    fn head(&self, cpu: crate::model::Cpu) -> String {
        match self.matcher {
            Matcher::Culprits(_) => format!("{} on CPU {cpu}", self.what),
            Matcher::StallsElsewhere => format!("{} (CPUs other than {cpu})", self.what),
        }
    }

    fn matches(&self, c: &CulpritEntry) -> bool {
        match &self.matcher {
            Matcher::Culprits(pick) => pick(c),
            Matcher::StallsElsewhere => false,
        }
    }
}

/// The culprit rows `pick` chooses, on `cpu`.
pub fn on_cpu(
    run: &RunFile,
    cpu: crate::model::Cpu,
    pick: impl Fn(&CulpritEntry) -> bool,
) -> Amount {
    run.culprits
        .iter()
        .filter(|c| pick(c))
        .fold(Amount::default(), |a, c| {
            let b = row_on(c, cpu);
            Amount {
                ns: a.ns + b.ns,
                count: a.count + b.count,
            }
        })
}

/// One culprit row's amount on `cpu`.
fn row_on(c: &CulpritEntry, cpu: crate::model::Cpu) -> Amount {
    c.cpus
        .iter()
        .filter(|x| x.cpu == cpu)
        .fold(Amount::default(), |a, x| Amount {
            ns: a.ns + x.measured_ns,
            count: a.count + x.episodes,
        })
}

/// One line of a step's grade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub passed: bool,
    pub text: String,
    /// False for a line that proves nothing either way (a target that was not there to
    /// remove): shown, not counted among the checks.
    pub counted: bool,
}

impl Check {
    pub fn new(passed: bool, text: String) -> Check {
        Check {
            passed,
            text,
            counted: true,
        }
    }
}

/// Seconds a run recorded (at least a millisecond, for rates).
fn secs(run: &RunFile) -> f64 {
    (run.run.duration_ns as f64 / 1e9).max(1e-3)
}

/// Grades `target` across `fix`: `before` is the run without it, `after` the run with it.
pub fn across(target: &Target, fix: &str, before: &RunFile, after: &RunFile, cpu: u32) -> Check {
    let (b, a) = (target.measure(before, cpu), target.measure(after, cpu));
    let head = format!("{}: {} → {}", target.head(cpu), b.text(), a.text());
    if b.count == 0 && b.ns == 0 {
        if target.injected {
            return Check::new(false, format!("{head} ✗ — not seen before {fix}: the injected noise did not reach CPU {cpu}, so the fix showed nothing"));
        }
        return Check {
            passed: true,
            text: format!("{head} — not seen before {fix} either: nothing for it to remove in this run (not counted)"),
            counted: false,
        };
    }
    match target.goal {
        Goal::Remove => {
            let down = 1.0 - a.ns as f64 / b.ns.max(1) as f64;
            if a.ns == 0 && a.count == 0 {
                Check::new(true, format!("{head} ✓ gone ({fix})"))
            } else if down >= 0.9 {
                Check::new(true, format!("{head} ✓ down {:.0}% ({fix})", down * 100.0))
            } else {
                Check::new(
                    false,
                    format!(
                        "{head} ✗ down {:.0}%: {fix} should have removed at least 90%",
                        down.max(0.0) * 100.0
                    ),
                )
            }
        }
        Goal::AtMost { per_s } => {
            let limit = (per_s * secs(after)).ceil() as u64 + 1;
            let rate = |n: u64, r: &RunFile| n as f64 / secs(r);
            let text = format!(
                "{head} ({:.1}/s → {:.1}/s; {fix} allows {per_s}/s)",
                rate(b.count, before),
                rate(a.count, after)
            );
            if b.count <= limit {
                // As few before as the fix allows after: the runs cannot tell the rates apart.
                return Check {
                    passed: true,
                    text: format!("{text} — too few before the fix to tell the rates apart in a run this short (not counted; a longer --duration shows it)"),
                    counted: false,
                };
            }
            if a.count <= limit {
                Check::new(true, format!("{text} ✓"))
            } else {
                Check::new(
                    false,
                    format!("{text} ✗ more than the {limit} it allows in this run"),
                )
            }
        }
    }
}

/// What remains on `cpu` in `run` besides the step's targets, largest first, each with why
/// the workshop's fixes so far leave it.
pub fn remains(run: &RunFile, cpu: u32, targets: &[Target], limit: usize) -> Vec<String> {
    let mut rows: Vec<(&CulpritEntry, Amount)> = run
        .culprits
        .iter()
        .filter(|c| !targets.iter().any(|t| t.matches(c)))
        .map(|c| (c, row_on(c, cpu)))
        .filter(|(_, a)| a.ns > 0)
        .collect();
    rows.sort_by_key(|(_, a)| std::cmp::Reverse(a.ns));
    let s = secs(run);
    rows.into_iter()
        .take(limit)
        .map(|(c, a)| {
            // A long detail (unexplained's) says what the reason says again.
            let detail = if c.detail.is_empty() || c.detail.len() > 24 {
                String::new()
            } else {
                format!(" {}", c.detail)
            };
            format!(
                "remains: {} {}{detail} {} ({}/s) — {}",
                c.class,
                c.name,
                a.text(),
                fmt_ns((a.ns as f64 / s) as Nanos),
                why_remains(c)
            )
        })
        .collect()
}

/// Why a culprit survives the workshop's fixes, and what would remove it.
pub fn why_remains(c: &CulpritEntry) -> String {
    let who = c.who();
    let function = who.function.as_deref().unwrap_or("");
    let worker = who.worker.as_deref().unwrap_or(&c.name);
    let named = |s: &str| c.name.contains(s) || c.detail.contains(s);
    match c.class {
        CulpritClass::Task if who.comm.as_deref() == Some("js-noise-task") => {
            "the competing task: the cpuset shield (SHIELDED) moves it".into()
        }
        CulpritClass::Task => "a task allowed on this CPU: the cpuset shield (SHIELDED) moves it unless its own affinity holds it here".into(),
        CulpritClass::Kworker if worker.starts_with("kworker/u") => {
            "unbound work: the workqueue cpumask (KWORKERS-MOVED) keeps it off".into()
        }
        CulpritClass::Kworker if function == "refresh_vm_stats" => "per-CPU work queued on every CPU by name (the injected writes to /proc/sys/vm/stat_refresh): no cpumask moves it; only stopping the writes removes it".into(),
        CulpritClass::Kworker if function == "vmstat_update" => "per-CPU VM statistics folding: vm.stat_interval spaces it out (KWORKERS-MOVED); nohz_full stops it on a quiet CPU (BOOT)".into(),
        CulpritClass::Kworker => "per-CPU work, run on the CPU it was queued for: no cpumask moves it; stop who queues it (its `queued by` in the report)".into(),
        CulpritClass::Kthread if named("rcu") => {
            "RCU's per-CPU kernel thread: rcu_nocbs= at boot moves its callbacks (BOOT)".into()
        }
        CulpritClass::Kthread => "a per-CPU kernel thread: it cannot leave the CPU".into(),
        CulpritClass::Irq => "a device IRQ: IRQ affinity moves it (IRQS-MOVED); a kernel-managed one only with isolcpus=managed_irq at boot (BOOT)".into(),
        CulpritClass::Softirq if named("RCU") => {
            "RCU callbacks: rcu_nocbs= at boot runs them elsewhere (BOOT)".into()
        }
        CulpritClass::Softirq => "softirq work raised by the interrupt or timer it follows: it goes with its cause".into(),
        CulpritClass::TimerTick => "the scheduler tick: only nohz_full= at boot stops it, and only while one task runs (BOOT)".into(),
        CulpritClass::Ipi => "an IPI another CPU sent: its sender's work (the report's `sent from`), not a setting of this CPU".into(),
        CulpritClass::Nmi => "an NMI: perf or the NMI watchdog (kernel.nmi_watchdog=0)".into(),
        CulpritClass::FreqChange => "a frequency change: the performance governor (GOVERNOR)".into(),
        CulpritClass::Fault => "the workload's own page faults: touch and lock its memory before it runs".into(),
        CulpritClass::SelfNoise => "jitterscope's own work on the CPU it measures (the self class)".into(),
        CulpritClass::Hypervisor => "the host kept the vCPU off its CPU (steal): no guest setting removes it (VM)".into(),
        CulpritClass::Unexplained => "no kernel event and no steal covered it: on a guest, the host's own work the steal clock does not count (VM)".into(),
        CulpritClass::Lost => "kernel records were lost here: the cause of that time is unknown".into(),
        CulpritClass::Throttled => "the scheduler held the runnable thread off its CPU (RT throttling, or a cgroup's CPU quota): kernel.sched_rt_runtime_us=-1 (RT), the quota (cpu.max)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::runfile::{tests as rf, CpuTheftEntry};

    fn row(class: CulpritClass, name: &str, cpu: u32, ns: u64, episodes: u64) -> CulpritEntry {
        let mut c = rf::culprit(class, name, ns);
        c.cpus = vec![CpuTheftEntry {
            cpu,
            measured_ns: ns,
            episodes,
            ..CpuTheftEntry::default()
        }];
        c
    }

    fn run_with(rows: Vec<CulpritEntry>) -> RunFile {
        let mut run = rf::sample();
        run.run.duration_ns = 2_000_000_000;
        run.culprits = rows;
        run
    }

    fn task() -> Target {
        Target::culprits("task js-noise-task", true, |c| {
            c.who().comm.as_deref() == Some("js-noise-task")
        })
    }

    #[test]
    fn a_fix_passes_when_its_target_is_gone_or_down_by_nine_tenths() {
        let before = run_with(vec![row(
            CulpritClass::Task,
            "js-noise-task[7]",
            1,
            100_000_000,
            100,
        )]);
        let gone = run_with(vec![]);
        let c = across(&task(), "the shield", &before, &gone, 1);
        assert!(c.passed && c.text.contains("gone"), "{c:?}");
        let down = run_with(vec![row(
            CulpritClass::Task,
            "js-noise-task[7]",
            1,
            9_000_000,
            9,
        )]);
        let c = across(&task(), "the shield", &before, &down, 1);
        assert!(c.passed && c.text.contains("down 91%"), "{c:?}");
        let half = run_with(vec![row(
            CulpritClass::Task,
            "js-noise-task[7]",
            1,
            50_000_000,
            50,
        )]);
        let c = across(&task(), "the shield", &before, &half, 1);
        assert!(!c.passed && c.text.contains("down 50%"), "{c:?}");
        // On another CPU it is not this CPU's.
        let elsewhere = run_with(vec![row(
            CulpritClass::Task,
            "js-noise-task[7]",
            0,
            50_000_000,
            50,
        )]);
        assert!(across(&task(), "the shield", &before, &elsewhere, 1).passed);
    }

    #[test]
    fn injected_noise_absent_before_the_fix_fails_the_fix() {
        let none = run_with(vec![]);
        let c = across(&task(), "the shield", &none, &none, 1);
        assert!(!c.passed && c.text.contains("did not reach CPU 1"), "{c:?}");
        let mut t = task();
        t.injected = false;
        let c = across(&t, "the shield", &none, &none, 1);
        assert!(c.passed && !c.counted, "{c:?}");
    }

    #[test]
    fn a_spaced_out_target_is_held_to_its_rate() {
        let vmstat = || {
            let mut t = Target::culprits("kworker vmstat_update", false, |c| {
                c.who().function.as_deref() == Some("vmstat_update")
            });
            t.goal = Goal::AtMost { per_s: 0.1 };
            t
        };
        let row_of = |n: u64| {
            let mut c = row(CulpritClass::Kworker, "kworker/1:1", 1, 10_000 * n, n);
            c.who = Some(crate::report::runfile::WhoEntry {
                function: Some("vmstat_update".into()),
                ..Default::default()
            });
            run_with(vec![c])
        };
        let before = row_of(5);
        // 2 s at 0.1/s: one, plus one armed before the change.
        let c = across(&vmstat(), "vm.stat_interval=10", &before, &row_of(2), 1);
        assert!(c.passed && c.counted, "{c:?}");
        assert!(!across(&vmstat(), "vm.stat_interval=10", &before, &row_of(3), 1).passed);
        // Two before in 2 s is within what the fix allows: nothing told apart, nothing counted.
        let c = across(&vmstat(), "vm.stat_interval=10", &row_of(2), &row_of(2), 1);
        assert!(!c.counted && c.text.contains("too few"), "{c:?}");
    }

    #[test]
    fn what_remains_leaves_out_the_targets_and_says_why() {
        let run = run_with(vec![
            row(CulpritClass::Task, "js-noise-task[7]", 1, 5_000_000, 5),
            row(CulpritClass::TimerTick, "local timer", 1, 2_000_000, 500),
            row(CulpritClass::Irq, "irq 34 virtio4-input", 0, 2_000_000, 500),
        ]);
        let r = remains(&run, 1, &[task()], 5);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].contains("nohz_full") && r[0].contains("1.00ms/s"),
            "{r:?}"
        );
    }
}
