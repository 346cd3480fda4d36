//! Known noise on a chosen CPU: per-CPU kworkers (`stat_refresh`), a device IRQ steered there
//! (virtio-rng, raised by reading `/dev/hwrng`), a competing pinned task named
//! `js-noise-task`, an hrtimer storm, unbound writeback work (`wb_workfn`), and frequency
//! changes where cpufreq exists. Every
//! injection is logged with its CLOCK_MONOTONIC window so results can be graded; every
//! setting changed on the way (IRQ affinity, frequency limits) goes through the restore
//! journal.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::Serialize;

use crate::model::{Cpu, Nanos};
use crate::platform::affinity;
use crate::platform::clock::monotonic_ns;
use crate::platform::input;
use crate::report::files::write_file;
use crate::system::tuning::{restore_leftovers, Tuner};
use crate::units::fmt_ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum NoiseKind {
    /// `echo 1 > /proc/sys/vm/stat_refresh`: refresh_vm_stats on every CPU's kworker
    Kworker,
    /// the virtio-rng IRQ steered to the CPU, raised by reading /dev/hwrng
    Irq,
    /// a competing busy task `js-noise-task` pinned to the CPU (1 ms bursts)
    Task,
    /// an hrtimer storm: a task pinned to the CPU sleeping 1/rate at a time
    Timer,
    /// frequency changes through cpufreq's scaling_max_freq
    Freq,
    /// a file dirtied and `sync()` called: the flusher's `wb_workfn`, unbound work
    /// (`kworker/uN:M`) that runs wherever the workqueue cpumask allows (the CPU given is where
    /// it should be seen)
    Writeback,
}

/// One injection: what, where, when.
#[derive(Debug, Clone, Serialize)]
pub struct Injection {
    pub kind: NoiseKind,
    pub cpu: Cpu,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

#[derive(Debug, thiserror::Error)]
pub enum NoiseError {
    #[error("{0}")]
    Unavailable(String),
    #[error("cannot inject {kind:?} noise: {cause}")]
    Failed { kind: NoiseKind, cause: String },
}

/// A steerable device IRQ whose raising we control: the virtio-rng queue's IRQ.
pub fn steerable_irq() -> Option<(u32, String)> {
    let dev = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_rng")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| n.starts_with("virtio"))?;
    let text = input::read_proc("/proc/interrupts", input::PROC_TABLE)?;
    text.lines().find_map(|l| {
        let name = l.split_whitespace().last()?;
        if name.starts_with(&format!("{dev}-")) && !name.ends_with("-config") {
            let irq = l.trim_start().split(':').next()?.parse().ok()?;
            Some((irq, name.to_string()))
        } else {
            None
        }
    })
}

/// A helper process of ours (`jitterscope __noise-task|__noise-timer`), ended by its pid.
struct Helper(Child);

impl Helper {
    fn spawn(sub: &str, cpu: Cpu, rate: u32) -> std::io::Result<Helper> {
        let exe = std::env::current_exe()?;
        Command::new(exe)
            .args([sub, "--cpu", &cpu.to_string(), "--rate", &rate.to_string()])
            .spawn()
            .map(Helper)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Injects `kind` on `cpu` at `rate` per second for `duration_ns`, until `stop()` says so.
pub fn inject(
    kind: NoiseKind,
    cpu: Cpu,
    rate: u32,
    duration_ns: Nanos,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Injection>, NoiseError> {
    let mut log = Vec::new();
    inject_each(kind, cpu, rate, duration_ns, stop, &mut |i| log.push(i))?;
    Ok(log)
}

/// As `inject`, handing each injection to `each` instead of keeping them all (noise that runs
/// for a whole run only needs its count: memory stays flat however long the run).
pub fn inject_each(
    kind: NoiseKind,
    cpu: Cpu,
    rate: u32,
    duration_ns: Nanos,
    stop: &dyn Fn() -> bool,
    each: &mut dyn FnMut(Injection),
) -> Result<(), NoiseError> {
    let fail = |cause: String| NoiseError::Failed { kind, cause };
    let period = 1_000_000_000 / u64::from(rate.max(1));
    let end = monotonic_ns() + duration_ns;
    let mut tuner = Tuner::new();
    let mut helper = None;
    let mut rng = None;
    let mut freqs = None;
    let mut dirty = None;
    match kind {
        NoiseKind::Kworker => {}
        NoiseKind::Writeback => dirty = Some(DirtyFile::create().map_err(fail)?),
        NoiseKind::Irq => {
            let (irq, name) = steerable_irq().ok_or_else(|| {
                NoiseError::Unavailable(
                    "no steerable IRQ to inject: this machine has no virtio-rng device (its IRQ is the one reading /dev/hwrng raises)".into(),
                )
            })?;
            tuner
                .set(
                    &format!("/proc/irq/{irq}/smp_affinity_list"),
                    &cpu.to_string(),
                )
                .map_err(|e| fail(format!("steering IRQ {irq} {name}: {e}")))?;
            rng = Some(
                std::fs::File::open("/dev/hwrng")
                    .map_err(|e| fail(format!("opening /dev/hwrng: {e}")))?,
            );
        }
        NoiseKind::Task => {
            helper =
                Some(Helper::spawn("__noise-task", cpu, rate).map_err(|e| fail(e.to_string()))?);
        }
        NoiseKind::Timer => {
            helper =
                Some(Helper::spawn("__noise-timer", cpu, rate).map_err(|e| fail(e.to_string()))?);
        }
        NoiseKind::Freq => {
            let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
            let read = |f: &str| {
                input::read_proc_or_error(format!("{dir}/{f}"), input::PROC_FILE)
                    .map(|s| s.trim().to_string())
            };
            match (read("cpuinfo_min_freq"), read("cpuinfo_max_freq")) {
                (Ok(min), Ok(max)) => freqs = Some((format!("{dir}/scaling_max_freq"), min, max)),
                _ => {
                    return Err(NoiseError::Unavailable(format!(
                        "no cpufreq driver for CPU {cpu} ({dir} is missing): frequency noise cannot be injected here; the cpu_frequency probe is checked through BPF_PROG_TEST_RUN instead"
                    )))
                }
            }
        }
    }
    let mut low = true;
    let mut next = monotonic_ns();
    while monotonic_ns() < end && !stop() {
        let now = monotonic_ns();
        if now < next {
            std::thread::sleep(std::time::Duration::from_nanos(
                (next - now).min(50_000_000),
            ));
            continue;
        }
        next += period;
        let start = monotonic_ns();
        match kind {
            NoiseKind::Kworker => std::fs::write("/proc/sys/vm/stat_refresh", "1")
                .map_err(|e| fail(format!("writing /proc/sys/vm/stat_refresh: {e}")))?,
            NoiseKind::Writeback => {
                if let Some(d) = dirty.as_mut() {
                    d.dirty_and_sync().map_err(fail)?;
                }
            }
            NoiseKind::Irq => {
                let mut buf = [0u8; 32];
                if let Some(f) = rng.as_mut() {
                    let _ = f.read(&mut buf);
                }
            }
            NoiseKind::Freq => {
                if let Some((path, min, max)) = &freqs {
                    tuner
                        .set(path, if low { min } else { max })
                        .map_err(|e| fail(e.to_string()))?;
                    low = !low;
                }
            }
            // The helper process does the work; the log records its life.
            NoiseKind::Task | NoiseKind::Timer => {}
        }
        each(Injection {
            kind,
            cpu,
            start_ns: start,
            end_ns: monotonic_ns(),
        });
    }
    drop(helper);
    // Dropping the tuner restores IRQ affinity and frequency limits.
    drop(tuner);
    Ok(())
}

/// A file of ours whose pages are dirtied and handed to the flusher: `sync()` queues
/// `wb_workfn` on the unbound `writeback` workqueue and waits for it. Removed on drop.
struct DirtyFile {
    path: PathBuf,
    file: std::fs::File,
}

impl DirtyFile {
    fn create() -> Result<DirtyFile, String> {
        let path = std::env::temp_dir().join(format!("jitterscope-dirty-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(DirtyFile { path, file })
    }

    /// One page rewritten and flushed: the file stays one page long.
    fn dirty_and_sync(&mut self) -> Result<(), String> {
        use std::io::Seek;
        let page = [0x5au8; 4096];
        self.file
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| self.file.write_all(&page))
            .map_err(|e| format!("writing {}: {e}", self.path.display()))?;
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        Ok(())
    }
}

impl Drop for DirtyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `__noise-task`: pinned to `cpu`, named `js-noise-task`, busy for 1 ms `rate` times a second.
pub fn run_task(cpu: Cpu, rate: u32) -> ! {
    let _ = affinity::pin_current_thread(cpu);
    affinity::name_current_thread("js-noise-task");
    let period = 1_000_000_000 / u64::from(rate.clamp(1, 900));
    loop {
        let t0 = monotonic_ns();
        while monotonic_ns() - t0 < 1_000_000 {
            std::hint::spin_loop();
        }
        let spent = monotonic_ns() - t0;
        if period > spent {
            std::thread::sleep(std::time::Duration::from_nanos(period - spent));
        }
    }
}

/// `__noise-timer`: pinned to `cpu`, named `js-noise-timer`, sleeping 1/rate at a time: every
/// sleep arms an hrtimer that fires on that CPU.
pub fn run_timer(cpu: Cpu, rate: u32) -> ! {
    let _ = affinity::pin_current_thread(cpu);
    affinity::name_current_thread("js-noise-timer");
    let period = std::time::Duration::from_nanos(1_000_000_000 / u64::from(rate.max(1)));
    loop {
        std::thread::sleep(period);
    }
}

/// Several injectors running at once, each on its own thread kept on `run_on` (off the CPUs
/// they disturb: they are jitterscope's own threads). Stopped on `stop` or drop.
pub struct NoiseSet {
    stop: Arc<AtomicBool>,
    threads: Vec<(NoiseKind, JoinHandle<InjectionLog>)>,
}

/// How many injections an injector made, or why it could not run.
pub type InjectionLog = Result<u64, NoiseError>;

impl NoiseSet {
    pub fn start(specs: &[(NoiseKind, Cpu, u32)], run_on: &[Cpu]) -> NoiseSet {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = specs
            .iter()
            .map(|&(kind, cpu, rate)| {
                let stop = stop.clone();
                let run_on = run_on.to_vec();
                let t = std::thread::spawn(move || {
                    if !run_on.is_empty() {
                        let _ = affinity::set_current_thread_cpus(&run_on);
                    }
                    let mut count = 0u64;
                    inject_each(
                        kind,
                        cpu,
                        rate,
                        u64::MAX / 2,
                        &|| stop.load(Ordering::Relaxed),
                        &mut |_| count += 1,
                    )
                    .map(|()| count)
                });
                (kind, t)
            })
            .collect();
        NoiseSet { stop, threads }
    }

    /// Stops every injector; per kind, its log or why it could not run.
    pub fn stop(mut self) -> Vec<(NoiseKind, InjectionLog)> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|(kind, t)| {
                let r = t.join().unwrap_or_else(|_| {
                    Err(NoiseError::Failed {
                        kind,
                        cause: "the injector thread panicked".into(),
                    })
                });
                (kind, r)
            })
            .collect()
    }
}

impl Drop for NoiseSet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, t) in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What `jitterscope noise` injects, where, how often and for how long.
#[derive(Debug, Clone)]
pub struct InjectionConfig {
    pub kind: NoiseKind,
    pub cpu: Cpu,
    /// Injections per second.
    pub rate: u32,
    pub duration_ns: Nanos,
    /// Write every injection here as a JSON line.
    pub log: Option<PathBuf>,
}

/// `jitterscope noise`: injects until the time is up or a signal arrives. Noise this machine
/// cannot make is a `skipped:` line, not a failure.
pub fn run_injection(cfg: &InjectionConfig, out: &mut dyn Write) -> anyhow::Result<()> {
    // A journal left by a killed run is undone first, so its old values are not lost.
    restore_leftovers();
    writeln!(
        out,
        "injecting {:?} noise on CPU {} at {}/s for {} (Ctrl-C ends early)",
        cfg.kind,
        cfg.cpu,
        cfg.rate,
        fmt_ns(cfg.duration_ns)
    )?;
    let stop = || crate::signals::received().is_some();
    let log = match inject(cfg.kind, cfg.cpu, cfg.rate, cfg.duration_ns, &stop) {
        Ok(log) => log,
        Err(NoiseError::Unavailable(why)) => {
            writeln!(out, "skipped: {why}")?;
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(path) = &cfg.log {
        let lines: String = log
            .iter()
            .map(|i| serde_json::to_string(i).unwrap_or_default() + "\n")
            .collect();
        write_file(path, lines.as_bytes())?;
    }
    writeln!(out, "{} injections", log.len())?;
    Ok(())
}

/// `kworker@3:100`: kind, CPU, injections per second.
pub fn parse_spec(text: &str) -> Result<(NoiseKind, Cpu, u32), String> {
    use clap::ValueEnum;
    let bad = || {
        format!("--inject {text}: write KIND@CPU:RATE, e.g. kworker@3:100 (kinds: kworker, irq, task, timer, freq, writeback)")
    };
    let (kind, rest) = text.split_once('@').ok_or_else(bad)?;
    let (cpu, rate) = rest.split_once(':').ok_or_else(bad)?;
    let kind = NoiseKind::from_str(kind, true).map_err(|_| bad())?;
    let cpu: Cpu = cpu.parse().map_err(|_| bad())?;
    let rate: u32 = rate.trim_end_matches("/s").parse().map_err(|_| bad())?;
    if !(1..=10_000).contains(&rate) {
        return Err(format!(
            "--inject {text}: a rate of {rate} per second is outside 1 to 10000"
        ));
    }
    Ok((kind, cpu, rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            parse_spec("kworker@3:100"),
            Ok((NoiseKind::Kworker, 3, 100))
        );
        assert_eq!(parse_spec("irq@1:50/s"), Ok((NoiseKind::Irq, 1, 50)));
        assert!(parse_spec("kworker3:100")
            .unwrap_err()
            .contains("KIND@CPU:RATE"));
        assert!(parse_spec("disk@1:5").is_err());
        assert!(parse_spec("task@1:0").unwrap_err().contains("outside"));
    }
}
