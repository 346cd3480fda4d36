//! The workshop's BOOT step: what only the boot command line removes. The workshop cannot
//! reboot, so the step measures a run with every earlier step's fix (saved, to compare with
//! after the reboot), runs `check` on the CPUs the kernel lets one isolate with those fixes
//! held, and turns what check saw into the boot parameters the running kernel lacks — each
//! with what it would remove here, the lines that put it on the command line (GRUB, grubby),
//! and the command that verifies it after the reboot: `--after-reboot`, the configuration
//! difference beside the consumer's culprits that went away, shrank or remain, and whether
//! each advised parameter took.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::grade::Check;
use super::steps::{self, Step};
use crate::check::observe::Promise;
use crate::check::{self, judge::per_second, CheckConfig, CheckReport, Format, Target};
use crate::model::{Cpu, Nanos};
use crate::report::advice::{Machine, Tracer};
use crate::report::files::{file_stem, utc_stamp};
use crate::report::runfile::RunFile;
use crate::session::RunPlan;
use crate::system::config::Configured;
use crate::system::tuning::Tuner;
use crate::units::{fmt_ns, format_list};

/// A boot parameter of isolation the step advises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Param {
    NohzFull,
    RcuNocbs,
    Isolcpus,
    Irqaffinity,
}

impl Param {
    pub const ALL: [Param; 4] = [
        Param::NohzFull,
        Param::RcuNocbs,
        Param::Isolcpus,
        Param::Irqaffinity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Param::NohzFull => "nohz_full",
            Param::RcuNocbs => "rcu_nocbs",
            Param::Isolcpus => "isolcpus",
            Param::Irqaffinity => "irqaffinity",
        }
    }
}

/// A parameter the running kernel lacks for the checked CPUs, with the value to boot with:
/// what the command line already gives it, the checked CPUs added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub param: Param,
    pub value: String,
}

impl Missing {
    /// `nohz_full=1`.
    pub fn arg(&self) -> String {
        format!("{}={}", self.param.name(), self.value)
    }
}

/// The CPUs check holds: the measured ones the kernel lets one isolate — all of them, unless
/// they are every online CPU; then all but boot CPU 0, which the kernel keeps for
/// housekeeping. `online` empty: the measured CPUs are taken as every CPU there is.
pub fn checked_machine(online: &[Cpu], measured: &[Cpu], virtual_machine: bool) -> Machine {
    let online = if online.is_empty() {
        measured.to_vec()
    } else {
        online.to_vec()
    };
    let all = Machine {
        online: online.clone(),
        measured: measured.to_vec(),
        virtual_machine,
        tracer: Tracer::Watch,
    };
    Machine {
        measured: all.isolcpus(),
        ..all
    }
}

fn has(list: &Option<Vec<Cpu>>, cpu: Cpu) -> bool {
    list.as_ref().is_some_and(|l| l.contains(&cpu))
}

/// The CPUs `p` names for `m`'s checked CPUs.
fn wanted(p: Param, m: &Machine) -> Vec<Cpu> {
    match p {
        Param::NohzFull | Param::RcuNocbs => m.nohz_full(),
        Param::Isolcpus => m.isolcpus(),
        Param::Irqaffinity => m.housekeeping(),
    }
}

/// `isolcpus=` on `c`'s command line keeps `cpus` out of the scheduler domains and away from
/// kernel-managed IRQs (no flag given means `domain` alone).
fn isolcpus_on_line(c: &Configured, cpus: &[Cpu]) -> bool {
    c.boot.isolcpus.as_ref().is_some_and(|i| {
        let flag = |f: &str| i.flags.iter().any(|x| x == f);
        cpus.iter().all(|x| i.cpus.contains(x))
            && (i.flags.is_empty() || flag("domain"))
            && flag("managed_irq")
    })
}

/// Whether `c` (its command line, or the kernel's state where that implies it) already has
/// `p` for `m`'s checked CPUs.
fn on_line(p: Param, c: &Configured, m: &Machine) -> bool {
    let cpus = wanted(p, m);
    match p {
        Param::NohzFull => cpus
            .iter()
            .all(|&x| has(&c.boot.nohz_full, x) || has(&c.nohz_full, x)),
        // A CPU the kernel runs tickless has no callbacks of its own (nohz_full implies it).
        Param::RcuNocbs => cpus
            .iter()
            .all(|&x| has(&c.boot.rcu_nocbs, x) || has(&c.nohz_full, x)),
        Param::Isolcpus => isolcpus_on_line(c, &cpus),
        Param::Irqaffinity => c
            .boot
            .irqaffinity
            .as_ref()
            .is_some_and(|l| !l.is_empty() && !m.measured.iter().any(|x| l.contains(x))),
    }
}

fn union(a: &Option<Vec<Cpu>>, b: &[Cpu]) -> String {
    let mut v = a.clone().unwrap_or_default();
    v.extend_from_slice(b);
    format_list(&v)
}

/// The value of `p` to boot with: the command line's, with what `m` needs added.
fn value(p: Param, c: &Configured, m: &Machine) -> String {
    let cpus = wanted(p, m);
    match p {
        Param::NohzFull => union(&c.boot.nohz_full, &cpus),
        Param::RcuNocbs => union(&c.boot.rcu_nocbs, &cpus),
        Param::Isolcpus => {
            let mut flags = vec!["managed_irq".to_string(), "domain".to_string()];
            let (old_flags, old_cpus) = c
                .boot
                .isolcpus
                .as_ref()
                .map(|i| (i.flags.clone(), Some(i.cpus.clone())))
                .unwrap_or_default();
            for f in old_flags {
                if !flags.contains(&f) {
                    flags.push(f);
                }
            }
            format!("{},{}", flags.join(","), union(&old_cpus, &cpus))
        }
        Param::Irqaffinity => {
            let kept: Vec<Cpu> = c
                .boot
                .irqaffinity
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|x| !m.measured.contains(x))
                .collect();
            format_list(if kept.is_empty() { &cpus } else { &kept })
        }
    }
}

/// The parameters `c` lacks for `m`'s checked CPUs, in `Param::ALL` order.
pub fn missing(c: &Configured, m: &Machine) -> Vec<Missing> {
    Param::ALL
        .iter()
        .filter(|&&p| !wanted(p, m).is_empty() && !on_line(p, c, m))
        .map(|&p| Missing {
            param: p,
            value: value(p, c, m),
        })
        .collect()
}

/// Whether an advised parameter took in a configuration read after the reboot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Took {
    /// On the command line, and where the kernel says so, in its own list.
    Yes(String),
    /// On the command line, but the kernel's own list lacks the CPUs: why.
    NotEffective(String),
    No,
}

pub fn took(p: Param, c: &Configured, m: &Machine) -> Took {
    if !on_line(p, c, m) {
        return Took::No;
    }
    let cpus = wanted(p, m);
    let list = format_list(&cpus);
    let in_list = |l: &Option<Vec<Cpu>>| cpus.iter().all(|&x| has(l, x));
    match p {
        Param::NohzFull if !in_list(&c.nohz_full) => Took::NotEffective(format!(
            "the kernel's nohz_full list lacks CPU {list}{}",
            if c.kernel_config.no_hz_full == Some(false) {
                ": the kernel is built without CONFIG_NO_HZ_FULL"
            } else {
                ""
            }
        )),
        Param::NohzFull => Took::Yes(format!("CPU {list} in the kernel's nohz_full list")),
        Param::Isolcpus if !in_list(&c.isolated) => {
            Took::NotEffective(format!("the kernel's isolated list lacks CPU {list}"))
        }
        Param::Isolcpus => Took::Yes(format!("CPU {list} in the kernel's isolated list")),
        Param::RcuNocbs | Param::Irqaffinity => Took::Yes("on the command line".into()),
    }
}

/// Something a missing parameter would remove, as check saw it on the checked CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Removal {
    what: &'static str,
    count: u64,
    time_ns: Nanos,
}

/// What `p` would remove, from `r`'s findings on its CPUs.
fn removals(p: Param, r: &CheckReport) -> Vec<Removal> {
    let managed = |irq: Option<u64>| {
        r.config
            .irqs
            .iter()
            .any(|i| Some(u64::from(i.irq)) == irq && i.managed == Some(true))
    };
    // The tick's finding already counts a residual tick of at most 1.5/s as stopped.
    let whole = |what, promise: Promise| {
        let fs = r.findings.iter().filter(|f| f.promise == promise);
        Removal {
            what,
            count: fs.clone().map(|f| f.count).sum(),
            time_ns: fs.map(|f| f.time_ns).sum(),
        }
    };
    let irqs = |what, pick_managed: bool| {
        let rows = r
            .findings
            .iter()
            .filter(|f| f.promise == Promise::NoDeviceIrqs)
            .flat_map(|f| &f.seen)
            .filter(|s| s.irq.is_some() && managed(s.irq) == pick_managed);
        Removal {
            what,
            count: rows.clone().map(|s| s.count).sum(),
            time_ns: rows.map(|s| s.time_ns).sum(),
        }
    };
    match p {
        Param::NohzFull => vec![whole("the scheduler tick", Promise::TickStopped)],
        Param::RcuNocbs => vec![whole(
            "RCU callbacks (the RCU softirq, rcuc threads)",
            Promise::NoRcuCallbacks,
        )],
        Param::Isolcpus => vec![
            whole(
                "load balancing (the SCHED softirq, the migration thread)",
                Promise::NoLoadBalancing,
            ),
            irqs("kernel-managed IRQs", true),
        ],
        Param::Irqaffinity => vec![irqs(
            "device IRQs (until the reboot, the IRQS-MOVED step's affinities keep them off)",
            false,
        )],
    }
}

/// `250/s, 1.10ms/s` (per CPU when check held several), or `nothing seen in 2.000s`.
fn figure(rm: &Removal, r: &CheckReport) -> String {
    let cpus = r.cpus.len().max(1) as f64;
    let secs = (r.duration_ns as f64 / 1e9).max(1e-9) * cpus;
    if rm.count == 0 {
        return format!("nothing seen in {}", fmt_ns(r.duration_ns));
    }
    format!(
        "{}/s, {}/s{}",
        per_second(rm.count as f64 / secs),
        fmt_ns((rm.time_ns as f64 / secs) as Nanos),
        if r.cpus.len() > 1 { " per CPU" } else { "" }
    )
}

/// `the scheduler tick, 250/s, 1.10ms/s here`.
fn describe(rm: &Removal, r: &CheckReport) -> String {
    format!("{}, {} here", rm.what, figure(rm, r))
}

/// What the kernel build itself lacks for `p`, as a clause.
fn build_note(p: Param, c: &Configured) -> &'static str {
    match p {
        Param::NohzFull if c.kernel_config.no_hz_full == Some(false) => {
            " — this kernel is built without CONFIG_NO_HZ_FULL: it takes a kernel built with it too"
        }
        Param::RcuNocbs if c.kernel_config.rcu_nocb_cpu == Some(false) => {
            " — this kernel is built without CONFIG_RCU_NOCB_CPU: it takes a kernel built with it too"
        }
        _ => "",
    }
}

/// One line per missing parameter: `nohz_full=1: the scheduler tick, 250/s, 1.10ms/s here`.
pub fn advice_lines(r: &CheckReport, missing: &[Missing]) -> Vec<String> {
    missing
        .iter()
        .map(|m| {
            let what: Vec<String> = removals(m.param, r)
                .iter()
                .map(|rm| describe(rm, r))
                .collect();
            format!(
                "{}: {}{}",
                m.arg(),
                what.join("; "),
                build_note(m.param, &r.config)
            )
        })
        .collect()
}

/// What stays until the reboot, one line per missing parameter: never a pass.
fn remains_lines(r: &CheckReport, missing: &[Missing]) -> Vec<String> {
    let cpus = format_list(&r.cpus);
    missing
        .iter()
        .map(|m| {
            let seen: Vec<String> = removals(m.param, r)
                .iter()
                .filter(|rm| rm.count > 0)
                .map(|rm| format!("{} on CPU {cpus}, {}", rm.what, figure(rm, r)))
                .collect();
            if seen.is_empty() {
                format!(
                    "{} is not on the kernel command line (nothing of its seen on CPU {cpus}): only a reboot with it makes it hold",
                    m.arg()
                )
            } else {
                format!(
                    "{} — only a reboot with {} removes it",
                    seen.join("; "),
                    m.arg()
                )
            }
        })
        .collect()
}

/// `line` with each of `args` set: an earlier value of the same parameter replaced, the rest
/// appended — before a lone `--`, after which the kernel hands the words to init.
pub fn with_params(line: &str, args: &[String]) -> String {
    let key = |w: &str| w.split('=').next().unwrap_or(w).to_string();
    let keys: Vec<String> = args.iter().map(|a| key(a)).collect();
    let words: Vec<&str> = line.split_whitespace().collect();
    let end = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    let mut out: Vec<String> = words[..end]
        .iter()
        .filter(|w| !keys.contains(&key(w)))
        .map(|w| w.to_string())
        .collect();
    out.extend(args.iter().cloned());
    out.extend(words[end..].iter().map(|w| w.to_string()));
    out.join(" ")
}

/// `GRUB_CMDLINE_LINUX_DEFAULT`'s value in `/etc/default/grub`'s text (the last assignment),
/// unquoted.
pub fn grub_default(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("GRUB_CMDLINE_LINUX_DEFAULT="))
        .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
}

/// The lines that put `args` on the boot command line: GRUB (from `grub`, the text of
/// `/etc/default/grub` where there is one), grubby, and the command line that results from
/// `cmdline` (the running kernel's).
pub fn boot_lines(args: &[String], grub: Option<&str>, cmdline: &str) -> Vec<String> {
    let joined = args.join(" ");
    let grub_line = match grub.map(grub_default) {
        Some(Some(current)) => format!(
            "in /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT=\"{}\"",
            with_params(&current, args)
        ),
        Some(None) => format!("in /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT=\"{joined}\" (it has none yet)"),
        None => format!(
            "in /etc/default/grub: append {joined} to GRUB_CMDLINE_LINUX_DEFAULT=\"…\" (this machine has no /etc/default/grub: its boot loader's own configuration takes the words)"
        ),
    };
    vec![
        format!("GRUB: {grub_line}"),
        "      then: sudo update-grub (Debian, Ubuntu) or sudo grub2-mkconfig -o /boot/grub2/grub.cfg (Fedora, RHEL, SUSE)".into(),
        format!("grubby: sudo grubby --update-kernel=ALL --args=\"{joined}\""),
        format!("kernel command line after the reboot: {}", with_params(cmdline, args)),
    ]
}

/// Where the session saved `run`: `<label>-<UTC start>.json` in the output directory.
fn saved_path(base: &RunPlan, run: &RunFile) -> PathBuf {
    base.output.path(&format!(
        "{}-{}.json",
        file_stem(&run.run.label),
        utc_stamp(run.run.start_unix_ns)
    ))
}

/// Check on the checked CPUs with every earlier step's fix held again (the step's run has
/// restored them): spinners hold the CPUs, joining the cpuset that holds each.
fn check_with_fixes(base: &RunPlan, checked: &[Cpu], others: &[Cpu]) -> Result<CheckReport> {
    let mut t = Tuner::new();
    steps::apply_carried(&mut t, Step::Boot, &base.workload.consumer_cpus, others)?;
    let report = check::run(&CheckConfig {
        cpus: checked.to_vec(),
        duration_ns: base.workload.duration_ns,
        target: Target::Spinners { fifo: false },
        format: Format::Text,
        ringbuf_bytes: base.probes.unwrap_or(8 << 20),
        json_file: None,
        kubelet: None,
    });
    drop(t);
    report
}

/// The BOOT step's measured run: the noise and every earlier fix, as every step.
fn measured(base: &RunPlan, others: &[Cpu], out: &mut dyn Write) -> Result<RunFile> {
    steps::run_step(Step::Boot, base, others, out)?
        .runs
        .pop()
        .ok_or_else(|| anyhow::anyhow!("the BOOT step measured no run"))
}

/// The BOOT step: the measured run (noise and every earlier fix, as every step), check on
/// the CPUs one may isolate, the advice, the boot lines and how to verify after the reboot.
pub fn run_step(
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<(RunFile, Vec<Check>)> {
    let run = measured(base, others, out)?;
    if run.run.ended != crate::model::Ended::Completed {
        // The run ended early (a signal, a lost CPU): the workshop stops here, check too.
        return Ok((run, Vec::new()));
    }
    let path = saved_path(base, &run);
    let online = crate::system::cpus::Topology::read().online;
    let config = run.config.clone().unwrap_or_default();
    let m = checked_machine(&online, &run.run.cpus, config.virtual_machine);
    let checked = format_list(&m.measured);
    if m.measured.len() < run.run.cpus.len() {
        writeln!(out, "  check: CPU {checked} only — every CPU is measured, and the kernel keeps boot CPU 0 for housekeeping: no boot parameter isolates it")?;
    }
    let report = match check_with_fixes(base, &m.measured, others) {
        Ok(r) => r,
        Err(e) => {
            let text = format!("check could not run on CPU {checked}: {e:#} ✗");
            writeln!(out, "  {text}")?;
            return Ok((run, vec![Check::new(false, text)]));
        }
    };
    writeln!(
        out,
        "  check: CPU {checked} for {}, held by {}, the earlier steps' fixes held",
        fmt_ns(report.duration_ns),
        report.held_by
    )?;
    let missing = missing(&report.config, &m);
    print_advice(&report, &missing, &run, &path, out)?;
    let text = format!(
        "check ran on CPU {checked} and the boot advice is above ({} parameter{} missing) ✓",
        missing.len(),
        if missing.len() == 1 { "" } else { "s" }
    );
    writeln!(out, "  {text}")?;
    Ok((run, vec![Check::new(true, text)]))
}

fn print_advice(
    r: &CheckReport,
    missing: &[Missing],
    run: &RunFile,
    path: &Path,
    out: &mut dyn Write,
) -> Result<()> {
    if missing.is_empty() {
        writeln!(out, "  the kernel command line already has every boot parameter for CPU {}: nothing for a reboot to add", format_list(&r.cpus))?;
    } else {
        writeln!(out, "  what each missing boot parameter would remove:")?;
        for l in advice_lines(r, missing) {
            writeln!(out, "    {l}")?;
        }
        writeln!(out, "  the boot line (then reboot):")?;
        let args: Vec<String> = missing.iter().map(Missing::arg).collect();
        let grub = crate::platform::input::read_proc(
            "/etc/default/grub",
            crate::platform::input::PROC_FILE,
        );
        for l in boot_lines(&args, grub.as_deref(), &r.config.cmdline) {
            writeln!(out, "    {l}")?;
        }
    }
    let cpus: Vec<String> = run.run.cpus.iter().map(Cpu::to_string).collect();
    let cpus = cpus.join(",");
    writeln!(out, "  after the reboot:")?;
    if path.exists() {
        writeln!(out, "    this step's run file: {}", path.display())?;
    } else {
        writeln!(
            out,
            "    this step's run file: the newest workshop-boot-*.json in the output directory"
        )?;
    }
    writeln!(
        out,
        "    sudo jitterscope workshop --cpus {cpus} --step boot --after-reboot {}",
        path.display()
    )?;
    writeln!(
        out,
        "    (or with a run of your own: jitterscope compare {} AFTER.json)",
        path.display()
    )?;
    for l in remains_lines(r, missing) {
        writeln!(out, "  remains: {l}")?;
    }
    Ok(())
}

/// Reads a run file given to `--after-reboot`; the error names the file and why.
fn read_run(path: &Path) -> Result<RunFile> {
    RunFile::read(path).with_context(|| {
        format!(
            "--after-reboot {}: cannot read it as a run file",
            path.display()
        )
    })
}

/// `--after-reboot BEFORE.json [AFTER.json]`: with one file, measure now (the BOOT step's run:
/// the same noise and fixes) and compare; with two, compare them. An error (exit 1) when an
/// advised parameter did not take.
pub fn after_reboot(
    paths: &[PathBuf],
    base: &RunPlan,
    others: &[Cpu],
    out: &mut dyn Write,
) -> Result<()> {
    let before_path = &paths[0];
    let before = read_run(before_path)?;
    let w = &base.workload;
    if before.run.producer_cpu != w.producer_cpu || before.run.consumer_cpus != w.consumer_cpus {
        anyhow::bail!(
            "--after-reboot {}: it measured CPUs {} (producer, then consumer); give the same: --cpus {}",
            before_path.display(),
            format_list(&before.run.cpus),
            before.run.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        );
    }
    let (after_path, after) = match paths.get(1) {
        Some(p) => (p.clone(), read_run(p)?),
        None => {
            let run = measured(base, others, out)?;
            (saved_path(base, &run), run)
        }
    };
    let (text, checks) = compare_after_reboot(
        &(before_path.display().to_string(), before),
        &(after_path.display().to_string(), after),
    )?;
    write!(out, "\n{text}")?;
    let failed = checks.iter().filter(|c| !c.passed).count();
    writeln!(
        out,
        "\nworkshop: {} of {} checks passed",
        checks.len() - failed,
        checks.len()
    )?;
    if failed > 0 {
        anyhow::bail!("{failed} advised boot parameter(s) did not take (see above)");
    }
    Ok(())
}

/// A culprit's time on one CPU per second of a run: (episodes/s, ns/s) by its name across
/// runs (a task's without its pid).
fn per_second_on(run: &RunFile, cpu: Cpu) -> BTreeMap<String, (f64, f64)> {
    let secs = (run.run.duration_ns as f64 / 1e9).max(1e-9);
    let mut m: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for c in &run.culprits {
        let (class, name, detail) =
            crate::report::compare::identity(c.class.as_str(), &c.name, &c.detail);
        let key = [class, name, detail]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        for t in c.cpus.iter().filter(|t| t.cpu == cpu) {
            let e = m.entry(key.clone()).or_default();
            e.0 += t.episodes as f64 / secs;
            e.1 += t.measured_ns as f64 / secs;
        }
    }
    m.retain(|_, v| v.1 > 0.0 || v.0 > 0.0);
    m
}

/// `250/s, 1.10ms/s`, or `none`.
fn rate_text(r: (f64, f64)) -> String {
    if r.0 == 0.0 && r.1 == 0.0 {
        return "none".into();
    }
    format!("{}/s, {}/s", per_second(r.0), fmt_ns(r.1 as Nanos))
}

/// Culprit rows shown, the largest first.
const ROWS_SHOWN: usize = 12;

/// A culprit shrank when its time per second fell to at most this share of what it was.
const SHRANK: f64 = 0.5;

/// The culprits on `cpu` before → after: gone, shrank, remains, appeared.
fn culprit_section(before: &RunFile, after: &RunFile, cpu: Cpu) -> String {
    let (a, b) = (per_second_on(before, cpu), per_second_on(after, cpu));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let get = |m: &BTreeMap<String, (f64, f64)>, k: &String| m.get(k).copied().unwrap_or_default();
    keys.sort_by(|x, y| {
        let big = |k| get(&a, k).1.max(get(&b, k).1);
        big(y).total_cmp(&big(x)).then_with(|| x.cmp(y))
    });
    let mut s = format!("\n## Culprits on CPU {cpu} (per second, before → after)\n\n");
    for k in keys.iter().take(ROWS_SHOWN) {
        let (x, y) = (get(&a, k), get(&b, k));
        let word = if x.1 == 0.0 && x.0 == 0.0 {
            "appeared"
        } else if y.1 == 0.0 && y.0 == 0.0 {
            "gone"
        } else if y.1 <= x.1 * SHRANK {
            "shrank"
        } else {
            "remains"
        };
        let _ = writeln!(s, "- {word}: {k} — {} → {}", rate_text(x), rate_text(y));
    }
    if keys.len() > ROWS_SHOWN {
        let _ = writeln!(
            s,
            "- … {} more (jitterscope compare lists the runs' culprits)",
            keys.len() - ROWS_SHOWN
        );
    }
    if keys.is_empty() {
        s.push_str("no culprit on this CPU in either run\n");
    }
    s
}

/// The comparison of the BOOT step's run before the reboot with one after it: the
/// configuration difference (compare's section), the consumer's culprits, and whether each
/// parameter advised from `before`'s configuration took in `after`'s (one check each).
pub fn compare_after_reboot(
    before: &(String, RunFile),
    after: &(String, RunFile),
) -> Result<(String, Vec<Check>)> {
    let Some(bc) = before.1.config.as_ref() else {
        anyhow::bail!("--after-reboot {}: the run file records no configuration (`config`): run the BOOT step again before the reboot, with this version", before.0);
    };
    let cpu = *before
        .1
        .run
        .consumer_cpus
        .first()
        .with_context(|| format!("--after-reboot {}: the run has no consumer CPU", before.0))?;
    let runs = [before.clone(), after.clone()];
    let mut s = String::from("# BOOT: before and after the reboot\n\n");
    for (label, (path, r)) in ["before", "after"].iter().zip(&runs) {
        let line = r
            .config
            .as_ref()
            .map_or("(not recorded)", |c| c.cmdline.as_str());
        let _ = writeln!(
            s,
            "- {label}: {path} — kernel {}, command line: {line}",
            r.run.kernel
        );
    }
    s.push_str(&crate::report::compare::configuration(&runs));
    s.push_str(&culprit_section(&before.1, &after.1, cpu));
    let m = checked_machine(&bc.online, &before.1.run.cpus, bc.virtual_machine);
    let advised = missing(bc, &m);
    let _ = writeln!(
        s,
        "\n## Advised boot parameters (missing before the reboot)\n"
    );
    if advised.is_empty() {
        s.push_str("none: the command line before the reboot had every one the step advises\n");
    } else if after.1.config.as_ref().map(|c| &c.cmdline) == Some(&bc.cmdline) {
        s.push_str("the kernel command line is the one from before: the boot line was not applied, or the machine was not rebooted since\n");
    }
    let mut checks = Vec::new();
    for a in &advised {
        let (passed, text) = match after.1.config.as_ref().map(|c| took(a.param, c, &m)) {
            Some(Took::Yes(how)) => (true, format!("{} took ✓ ({how})", a.arg())),
            Some(Took::NotEffective(why)) => (
                false,
                format!(
                    "{} is on the command line but did not take ✗: {why}",
                    a.arg()
                ),
            ),
            Some(Took::No) => (
                false,
                format!(
                    "{} did not take ✗: not on the command line after the reboot",
                    a.arg()
                ),
            ),
            None => (
                false,
                format!(
                    "{} cannot be told ✗: {} records no configuration",
                    a.arg(),
                    after.0
                ),
            ),
        };
        let _ = writeln!(s, "- {text}");
        checks.push(Check::new(passed, text));
    }
    Ok((s, checks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::judge::{Finding, How, Verdict};
    use crate::check::observe::Seen;
    use crate::model::CulpritClass;
    use crate::report::runfile::{tests as rf, CpuTheftEntry, CulpritEntry};
    use crate::system::config::{IrqConfig, Isolcpus};

    fn finding(promise: Promise, count: u64, time_ns: Nanos, seen: Vec<Seen>) -> Finding {
        Finding {
            cpu: 1,
            promise,
            verdict: if count > 0 {
                Verdict::NotConfigured
            } else {
                Verdict::Held
            },
            configured: false,
            settings: Vec::new(),
            count,
            time_ns,
            how: How::Measured,
            seen,
            why: String::new(),
            fixes: Vec::new(),
            remains: Vec::new(),
        }
    }

    /// A 2-CPU guest with nothing on its command line, checked on CPU 1 for 2 s: the tick at
    /// 250/s (2.2 ms/s), a managed IRQ 30 a few times, nothing else.
    fn report() -> CheckReport {
        let irq = Seen {
            class: Some(CulpritClass::Irq),
            name: "virtio1-req.0".into(),
            irq: Some(30),
            count: 4,
            time_ns: 40_000,
            ..Seen::default()
        };
        CheckReport {
            schema: check::SCHEMA.into(),
            host: "h".into(),
            kernel: "6.18.0".into(),
            cpus: vec![1],
            siblings: Vec::new(),
            duration_ns: 2_000_000_000,
            held_by: "a SCHED_OTHER spinner on each CPU".into(),
            exit_code: 1,
            findings: vec![
                finding(Promise::TickStopped, 500, 4_400_000, Vec::new()),
                finding(Promise::NoDeviceIrqs, 4, 40_000, vec![irq]),
                finding(Promise::NoRcuCallbacks, 0, 0, Vec::new()),
                finding(Promise::NoLoadBalancing, 0, 0, Vec::new()),
            ],
            lost: Vec::new(),
            tick_stops: Vec::new(),
            counters: Default::default(),
            kubernetes: None,
            config: Configured {
                online: vec![0, 1],
                cmdline: "console=ttyS0 quiet -- --init-arg".into(),
                irqs: vec![IrqConfig {
                    irq: 30,
                    name: "virtio1-req.0".into(),
                    affinity: vec![0, 1],
                    managed: Some(true),
                    ..Default::default()
                }],
                ..Default::default()
            },
        }
    }

    #[test]
    fn on_two_cpus_the_advice_names_the_consumer_alone_with_the_tick_seen() {
        let r = report();
        let m = checked_machine(&[0, 1], &[0, 1], true);
        assert_eq!(m.measured, vec![1], "boot CPU 0 stays a housekeeping CPU");
        let missing = missing(&r.config, &m);
        let args: Vec<String> = missing.iter().map(Missing::arg).collect();
        assert_eq!(
            args,
            [
                "nohz_full=1",
                "rcu_nocbs=1",
                "isolcpus=managed_irq,domain,1",
                "irqaffinity=0"
            ]
        );
        let lines = advice_lines(&r, &missing);
        assert_eq!(
            lines[0],
            "nohz_full=1: the scheduler tick, 250/s, 2.20ms/s here"
        );
        assert_eq!(
            lines[1],
            "rcu_nocbs=1: RCU callbacks (the RCU softirq, rcuc threads), nothing seen in 2.000s here"
        );
        assert_eq!(
            lines[2],
            "isolcpus=managed_irq,domain,1: load balancing (the SCHED softirq, the migration thread), nothing seen in 2.000s here; kernel-managed IRQs, 2.0/s, 20.0µs/s here"
        );
        assert!(
            lines[3].starts_with("irqaffinity=0: device IRQs") && lines[3].contains("nothing seen"),
            "{lines:?}"
        );
        // Every missing parameter remains until the reboot, whether or not its culprit was seen.
        let remains = remains_lines(&r, &missing);
        assert_eq!(remains.len(), 4);
        assert_eq!(
            remains[0],
            "the scheduler tick on CPU 1, 250/s, 2.20ms/s — only a reboot with nohz_full=1 removes it"
        );
        assert!(remains[1].contains("rcu_nocbs=1 is not on the kernel command line"));
    }

    #[test]
    fn a_kernel_without_no_hz_full_is_named_beside_the_parameter() {
        let mut r = report();
        r.config.kernel_config.no_hz_full = Some(false);
        let m = checked_machine(&[0, 1], &[0, 1], true);
        let lines = advice_lines(&r, &missing(&r.config, &m));
        assert!(
            lines[0].ends_with("— this kernel is built without CONFIG_NO_HZ_FULL: it takes a kernel built with it too"),
            "{lines:?}"
        );
    }

    #[test]
    fn parameters_already_on_the_line_are_not_advised_and_partial_ones_are_extended() {
        let m = checked_machine(&[0, 1, 2, 3], &[1, 3], false);
        assert_eq!(m.measured, vec![1, 3]);
        let mut c = Configured::default();
        c.boot.nohz_full = Some(vec![1, 3]);
        c.nohz_full = Some(vec![1, 3]);
        c.boot.isolcpus = Some(Isolcpus {
            flags: vec!["domain".into()],
            cpus: vec![3],
        });
        c.boot.irqaffinity = Some(vec![0, 1]);
        let args: Vec<String> = missing(&c, &m).iter().map(Missing::arg).collect();
        // nohz_full holds (and implies rcu_nocbs); isolcpus gains managed_irq and CPU 1;
        // irqaffinity drops the measured CPU 1.
        assert_eq!(args, ["isolcpus=managed_irq,domain,1,3", "irqaffinity=0"]);
        assert_eq!(
            took(Param::NohzFull, &c, &m),
            Took::Yes("CPU 1,3 in the kernel's nohz_full list".into())
        );
        c.nohz_full = None;
        assert_eq!(
            took(Param::NohzFull, &c, &m),
            Took::NotEffective("the kernel's nohz_full list lacks CPU 1,3".into()),
            "on the line, not in the kernel's list"
        );
        c.boot.nohz_full = None;
        assert_eq!(took(Param::NohzFull, &c, &m), Took::No);
    }

    #[test]
    fn the_boot_line_replaces_a_parameter_and_stays_before_init_arguments() {
        let args = vec!["nohz_full=1".to_string(), "irqaffinity=0".to_string()];
        assert_eq!(
            with_params("console=ttyS0 nohz_full=3 quiet -- --init x", &args),
            "console=ttyS0 quiet nohz_full=1 irqaffinity=0 -- --init x"
        );
        assert_eq!(with_params("", &args), "nohz_full=1 irqaffinity=0");
        let grub = "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"\"\n";
        assert_eq!(grub_default(grub).as_deref(), Some("quiet splash"));
        let lines = boot_lines(&args, Some(grub), "BOOT_IMAGE=/vmlinuz ro quiet");
        assert_eq!(
            lines[0],
            "GRUB: in /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash nohz_full=1 irqaffinity=0\""
        );
        assert!(lines[1].contains("update-grub") && lines[1].contains("grub2-mkconfig -o"));
        assert_eq!(
            lines[2],
            "grubby: sudo grubby --update-kernel=ALL --args=\"nohz_full=1 irqaffinity=0\""
        );
        assert_eq!(
            lines[3],
            "kernel command line after the reboot: BOOT_IMAGE=/vmlinuz ro quiet nohz_full=1 irqaffinity=0"
        );
        assert!(boot_lines(&args, None, "")[0].contains("no /etc/default/grub"));
    }

    fn on_cpu(class: CulpritClass, name: &str, cpu: Cpu, episodes: u64, ns: u64) -> CulpritEntry {
        let mut c = rf::culprit(class, name, ns);
        c.episodes = episodes;
        c.cpus = vec![CpuTheftEntry {
            cpu,
            measured_ns: ns,
            episodes,
            ..CpuTheftEntry::default()
        }];
        c
    }

    /// A BOOT run on a 2-CPU guest (producer 0, consumer 1, 1 s) with `config`.
    fn boot_run(config: Configured, culprits: Vec<CulpritEntry>) -> RunFile {
        let mut r = rf::sample();
        r.run.label = "workshop-boot".into();
        r.run.cpus = vec![0, 1];
        r.run.producer_cpu = 0;
        r.run.consumer_cpus = vec![1];
        r.run.duration_ns = 1_000_000_000;
        r.config = Some(config);
        r.culprits = culprits;
        r
    }

    #[test]
    fn after_the_reboot_the_configuration_change_is_shown_beside_the_tick_gone() {
        let before = Configured {
            kernel: "6.18.0".into(),
            cmdline: "console=ttyS0 quiet".into(),
            online: vec![0, 1],
            ..Default::default()
        };
        let mut after = before.clone();
        after.cmdline = "console=ttyS0 quiet nohz_full=1 rcu_nocbs=1".into();
        after.boot.nohz_full = Some(vec![1]);
        after.boot.rcu_nocbs = Some(vec![1]);
        after.nohz_full = Some(vec![1]);
        let runs = (
            (
                "before.json".to_string(),
                boot_run(
                    before,
                    vec![
                        on_cpu(CulpritClass::TimerTick, "scheduler tick", 1, 250, 1_100_000),
                        on_cpu(CulpritClass::Softirq, "RCU", 1, 40, 200_000),
                        on_cpu(CulpritClass::Hypervisor, "host preemption", 1, 5, 1_000_000),
                    ],
                ),
            ),
            (
                "after.json".to_string(),
                boot_run(
                    after,
                    vec![
                        on_cpu(CulpritClass::Softirq, "RCU", 1, 4, 20_000),
                        on_cpu(CulpritClass::Hypervisor, "host preemption", 1, 5, 900_000),
                    ],
                ),
            ),
        );
        let (text, checks) = compare_after_reboot(&runs.0, &runs.1).expect("compared");
        for expected in [
            "- before: before.json — kernel k, command line: console=ttyS0 quiet\n",
            "- after: after.json — kernel k, command line: console=ttyS0 quiet nohz_full=1 rcu_nocbs=1\n",
            "nohz_full=1 added: scheduler tick on CPU 1 250/s → 0/s",
            "rcu_nocbs=1 added",
            "nohz_full CPUs (kernel) unknown → 1",
            "## Culprits on CPU 1 (per second, before → after)",
            "- gone: timer_tick scheduler tick — 250/s, 1.10ms/s → none\n",
            "- shrank: softirq RCU — 40/s, 200.0µs/s → 4.0/s, 20.0µs/s\n",
            "- remains: hypervisor host preemption — 5.0/s, 1.00ms/s → 5.0/s, 900.0µs/s\n",
            "- nohz_full=1 took ✓ (CPU 1 in the kernel's nohz_full list)\n",
            "- rcu_nocbs=1 took ✓ (on the command line)\n",
            "- isolcpus=managed_irq,domain,1 did not take ✗: not on the command line after the reboot\n",
            "- irqaffinity=0 did not take ✗",
        ] {
            assert!(text.contains(expected), "{expected:?} not in:\n{text}");
        }
        let passed: Vec<bool> = checks.iter().map(|c| c.passed).collect();
        assert_eq!(passed, [true, true, false, false]);
    }

    #[test]
    fn the_same_command_line_after_says_the_boot_line_was_not_applied() {
        let config = Configured {
            cmdline: "console=ttyS0".into(),
            online: vec![0, 1],
            ..Default::default()
        };
        let pair = ("same.json".to_string(), boot_run(config, Vec::new()));
        let (text, checks) = compare_after_reboot(&pair, &pair).expect("compared");
        assert!(
            text.contains(
                "the kernel command line is the one from before: the boot line was not applied"
            ),
            "{text}"
        );
        assert!(checks.iter().all(|c| !c.passed), "{checks:?}");
    }

    #[test]
    fn a_run_file_without_configuration_is_named_in_the_error() {
        let mut r = boot_run(Configured::default(), Vec::new());
        r.config = None;
        let pair = ("old.json".to_string(), r);
        let e = compare_after_reboot(&pair, &pair).expect_err("no config");
        assert!(
            e.to_string()
                .contains("--after-reboot old.json: the run file records no configuration"),
            "{e}"
        );
    }
}
