//! Helpers shared by the integration tests: BPF-test gating, one-at-a-time CPU use, noise
//! sources the tests start themselves (and end by pid), and restore guards.
#![allow(dead_code)]

pub mod containers;
pub mod perf;

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// True in CI: `CI` is `true` or `1`, in any case (`.ci/run` sets it; so do most CI services).
pub fn in_ci() -> bool {
    ci_value(std::env::var("CI").ok().as_deref())
}

/// Whether a value of `CI` means CI.
pub fn ci_value(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1")
}

/// Why a test does not run here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lack {
    /// The machine lacks a piece of hardware the test needs (a second CPU, a virtio-rng
    /// device, a cpufreq driver): a skip, also in CI, listed in `scripts/test.sh`'s summary.
    Hardware,
    /// Something the machine could have but is not set up with (a tool, root, a cgroup
    /// hierarchy, a setting): in CI the test fails naming it; elsewhere a listed skip.
    Precondition,
}

/// The environment variable naming the file each skip is appended to, one line each
/// (`binary::test<TAB>reason`); `scripts/test.sh` sets it and sums the file up at its end.
pub const SKIP_LOG: &str = "JITTERSCOPE_SKIP_LOG";

/// The test binary's name (`probe_bpf` for `target/release/deps/probe_bpf-0123abcd`).
fn binary_name() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem,
    }
}

/// Records that `test` does not run here because of `reason`. In CI a missing
/// [`Lack::Precondition`] panics with the reason instead; every other skip is printed to
/// stderr and appended to the skip log (see [`SKIP_LOG`]). The caller returns after it.
pub fn skip(test: &str, reason: &str, kind: Lack) {
    let log = std::env::var_os(SKIP_LOG).map(std::path::PathBuf::from);
    skip_in(test, reason, kind, in_ci(), log.as_deref());
}

/// [`skip`] with CI and the skip log given.
pub fn skip_in(test: &str, reason: &str, kind: Lack, ci: bool, log: Option<&std::path::Path>) {
    let name = format!("{}::{test}", binary_name());
    if kind == Lack::Precondition && ci {
        panic!("{name}: {reason} (a missing precondition fails in CI; set the machine up)");
    }
    eprintln!("skipped: {name} ({reason})");
    if let Some(path) = log {
        use std::io::Write;
        let line = format!("{name}\t{}\n", reason.replace(['\t', '\n'], " "));
        // One write of one short line to a file opened for appending: lines of tests
        // running at the same time do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot append to the skip log {}: {e}", path.display());
        }
    }
}

/// True when a BPF test must be skipped: only outside CI, only with JITTERSCOPE_SKIP_BPF=1,
/// and it is recorded as a skip by name. Everywhere else a BPF test runs and fails with the
/// reason.
pub fn skip_bpf(test: &str) -> bool {
    if !in_ci() && std::env::var("JITTERSCOPE_SKIP_BPF").is_ok_and(|v| v == "1") {
        skip(test, "JITTERSCOPE_SKIP_BPF=1", Lack::Precondition);
        return true;
    }
    false
}

/// True (and recorded as a hardware skip) when the machine has fewer than `n` CPUs.
pub fn fewer_cpus_than(test: &str, n: usize) -> bool {
    let have = nproc();
    if have < n {
        skip(test, &format!("{have} CPU(s), needs {n}"), Lack::Hardware);
        return true;
    }
    false
}

/// True (and recorded as a hardware skip) unless the machine has exactly `n` CPUs.
pub fn cpus_other_than(test: &str, n: usize) -> bool {
    let have = nproc();
    if have != n {
        skip(
            test,
            &format!("{have} CPU(s), needs exactly {n}"),
            Lack::Hardware,
        );
        return true;
    }
    false
}

/// True (recorded as a missing precondition) unless this process runs as root.
pub fn not_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "not root", Lack::Precondition);
        return true;
    }
    false
}

/// True (recorded as a missing precondition) when the program `tool` cannot be started
/// (tried with the argument `arg`, e.g. `--version`).
pub fn missing_tool(test: &str, tool: &str, arg: &str) -> bool {
    if Command::new(tool).arg(arg).output().is_err() {
        skip(
            test,
            &format!("`{tool}` is not installed"),
            Lack::Precondition,
        );
        return true;
    }
    false
}

/// The virtio-rng IRQ the tests steer and raise (by reading /dev/hwrng), or None, recorded as
/// a skip: a hardware skip where the machine has no virtio-rng device, a missing precondition
/// where it has one but the `virtio_rng` driver is not bound to it.
pub fn steerable_irq_or_skip(test: &str) -> Option<(u32, String)> {
    let irq = jitterscope::workshop::noise::steerable_irq();
    if irq.is_none() {
        // Device ID 4 is the entropy source (virtio specification, "Device Types").
        let device = std::fs::read_dir("/sys/bus/virtio/devices")
            .into_iter()
            .flatten()
            .flatten()
            .any(|d| {
                std::fs::read_to_string(d.path().join("device"))
                    .is_ok_and(|id| id.trim() == "0x0004")
            });
        if device {
            skip(
                test,
                "a virtio-rng device without its IRQ in /proc/interrupts (load virtio_rng)",
                Lack::Precondition,
            );
        } else {
            skip(
                test,
                "no virtio-rng device: no IRQ to steer",
                Lack::Hardware,
            );
        }
    }
    irq
}

static CPUS: Mutex<()> = Mutex::new(());

/// Tests that spin on CPUs or inject noise run one at a time.
pub fn exclusive() -> MutexGuard<'static, ()> {
    CPUS.lock().unwrap_or_else(|e| e.into_inner())
}

/// `jitterscope ARGS` fails as a usage error: exit code 2, one line on stderr containing
/// `expect`, no panic.
pub fn usage_error(args: &[&str], expect: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(expect),
        "{args:?}: expected {expect:?} in {stderr:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn pin(pid: i32, cpu: usize) {
    // SAFETY: plain cpu_set_t manipulation and a syscall on a pid we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(pid, std::mem::size_of_val(&set), &set),
            0
        );
    }
}

/// A shell busy loop pinned to a CPU: the classic competing task. Killed by its pid on drop.
pub struct Competitor(pub Child);

impl Competitor {
    pub fn start(cpu: usize) -> Competitor {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("spawn sh");
        pin(child.id() as i32, cpu);
        Competitor(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An in-process thread spinning on a CPU, reading the clock like the workload does and
/// keeping the gaps (stalls) it sees. Stands in for a workload thread in probe tests.
pub struct Spinner {
    stop: Arc<AtomicBool>,
    tid: Arc<AtomicU32>,
    handle: Option<std::thread::JoinHandle<Vec<(u64, u64)>>>,
}

impl Spinner {
    pub fn start(cpu: usize) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicU32::new(0));
        let (s, t) = (stop.clone(), tid.clone());
        let handle = std::thread::spawn(move || {
            pin(0, cpu);
            t.store(unsafe { libc::gettid() } as u32, Ordering::SeqCst);
            let mut gaps = Vec::new();
            let mut last = jitterscope::workload::clock::monotonic_ns();
            while !s.load(Ordering::Relaxed) {
                let now = jitterscope::workload::clock::monotonic_ns();
                if now - last > 5_000 {
                    gaps.push((last, now));
                }
                last = now;
            }
            gaps
        });
        while tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        Spinner {
            stop,
            tid,
            handle: Some(handle),
        }
    }

    pub fn tid(&self) -> u32 {
        self.tid.load(Ordering::SeqCst)
    }

    /// Stops the thread and returns its gaps over 5 µs.
    pub fn finish(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A shell loop pinned to a CPU that sleeps 2 ms at a time (`sleep`, a new process each
/// time): hrtimer_wakeup timers of a task that is not jitterscope's. Killed by its pid on drop.
pub struct SleepLoop(pub Child);

impl SleepLoop {
    pub fn start(cpu: usize) -> SleepLoop {
        let child = Command::new("taskset")
            .args([
                "-c",
                &cpu.to_string(),
                "sh",
                "-c",
                "while :; do sleep 0.002; done",
            ])
            .spawn()
            .expect("spawn taskset sh");
        SleepLoop(child)
    }
}

impl Drop for SleepLoop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An in-process thread pinned to a CPU that sleeps `period_ns` at a time with
/// clock_nanosleep (an hrtimer_wakeup timer each time), optionally SCHED_FIFO so that every
/// wake-up preempts whatever runs there. Named `name`.
pub struct Sleeper {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
    /// Its thread id.
    pub tid: u32,
}

impl Sleeper {
    pub fn start(name: &str, cpu: usize, period_ns: u64, fifo: bool) -> Sleeper {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                pin(0, cpu);
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() } as u32);
                if fifo {
                    let p = libc::sched_param { sched_priority: 1 };
                    // SAFETY: sets this thread's own policy; 0 means the calling thread.
                    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
                    assert_eq!(rc, 0, "SCHED_FIFO needs root");
                }
                let t = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: period_ns as libc::c_long,
                };
                let mut n = 0;
                while !s.load(Ordering::Relaxed) {
                    // SAFETY: plain syscall with a valid timespec and no remainder pointer.
                    unsafe {
                        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &t, std::ptr::null_mut())
                    };
                    n += 1;
                }
                n
            })
            .expect("spawn the sleeper thread");
        Sleeper {
            stop,
            handle: Some(handle),
            tid: rx.recv().expect("the sleeper's tid"),
        }
    }

    /// Stops the thread and returns how many times it slept.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Writes a system setting and puts the old value back on drop (also when a test fails).
pub struct Restore {
    path: String,
    old: String,
}

impl Restore {
    pub fn set(path: &str, value: &str) -> std::io::Result<Restore> {
        let old = std::fs::read_to_string(path)?;
        std::fs::write(path, value)?;
        Ok(Restore {
            path: path.to_string(),
            old: old.trim().to_string(),
        })
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.old) {
            eprintln!(
                "WARNING: could not restore {} to {}: {e}",
                self.path, self.old
            );
        }
    }
}

/// The per-CPU count of a row of /proc/interrupts (`IWI`, `CAL`, `LOC`, `34`…).
pub fn interrupts(row: &str, cpu: usize) -> u64 {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    text.lines()
        .find(|l| l.trim_start().starts_with(&format!("{row}:")))
        .and_then(|l| l.split_whitespace().nth(1 + cpu))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Compares `actual` with `tests/golden/<name>`; with `UPDATE_GOLDEN` set it rewrites the
/// file and fails, saying so (check the new output by eye, then run again without it).
pub fn golden(name: &str, actual: &str) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    golden_at(&path, actual, std::env::var_os("UPDATE_GOLDEN").is_some());
}

/// [`golden`] for the file `path`, rewriting it when `update`.
pub fn golden_at(path: &str, actual: &str, update: bool) {
    if update {
        std::fs::write(path, actual).unwrap();
        panic!("{}", rewritten(path));
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("missing golden file {path}: {e} (UPDATE_GOLDEN=1 writes it)"));
    assert_eq!(actual, expected, "output differs from {path}");
}

/// What a golden test says after rewriting its file: it fails, so that a run with
/// `UPDATE_GOLDEN` set never passes.
pub fn rewritten(path: &str) -> String {
    format!(
        "UPDATE_GOLDEN is set: rewrote {path}; check it by eye (git diff), then run again without UPDATE_GOLDEN"
    )
}

/// Every system setting jitterscope's tuning may touch, as text, to compare before/after.
pub fn snapshot() -> Vec<(String, String)> {
    let mut paths = vec![
        jitterscope::system::actions::WORKQUEUE_CPUMASK.to_string(),
        jitterscope::system::actions::STAT_INTERVAL.to_string(),
        "/proc/sys/kernel/sched_rt_runtime_us".to_string(),
    ];
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    paths.extend(
        irqs.iter()
            .map(|i| format!("/proc/irq/{i}/smp_affinity_list")),
    );
    let mut out: Vec<(String, String)> = paths
        .into_iter()
        .filter_map(|p| {
            Some((
                p.clone(),
                std::fs::read_to_string(&p).ok()?.trim().to_string(),
            ))
        })
        .collect();
    if let Some((root, _, _)) = jitterscope::system::actions::cpuset_root() {
        let shield = format!("{root}/{}", jitterscope::system::actions::SHIELD_NAME);
        out.push((
            shield.clone(),
            std::path::Path::new(&shield).exists().to_string(),
        ));
    }
    // kthreadd (pid 2) cannot join a cpuset: a shield sets its CPUs instead.
    let kthreadd = std::fs::read_to_string("/proc/2/status").unwrap_or_default();
    if let Some(l) = kthreadd
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
    {
        out.push(("kthreadd CPUs".into(), l.to_string()));
    }
    out
}

/// A figure as `fmt_ns` writes it (`812ns`, `12.4µs`, `3.21ms`, `1.479s`).
pub fn parse_ns(s: &str) -> u64 {
    let (number, scale) = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        .into_iter()
        .find_map(|(unit, scale)| s.strip_suffix(unit).map(|n| (n, scale)))
        .unwrap_or_else(|| panic!("not a duration: {s}"));
    (number.parse::<f64>().unwrap_or_else(|e| panic!("{s}: {e}")) * scale) as u64
}

/// The run file a run wrote into `dir` (not its `.trace.json`).
pub fn run_file_in(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.to_string_lossy().ends_with(".trace.json")
        })
        .unwrap_or_else(|| panic!("no run file in {}", dir.display()))
}

/// One interval of an `.hlog` file, decoded.
pub struct HlogInterval {
    pub tag: String,
    /// Seconds from the log's base time.
    pub start_s: f64,
    pub length_s: f64,
    /// The line's own max column.
    pub max: f64,
    pub histogram: hdrhistogram::Histogram<u64>,
}

/// Every interval of the interval log `text`, in the order of its lines.
pub fn hlog_intervals(text: &str) -> Vec<HlogInterval> {
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    IntervalLogIterator::new(text.as_bytes())
        .map(|e| e.expect("a well-formed interval log"))
        .filter_map(|e| match e {
            LogEntry::Interval(i) => Some(i),
            _ => None,
        })
        .map(|i| {
            let bytes = base64_decode(i.encoded_histogram());
            let histogram = hdrhistogram::serialization::Deserializer::new()
                .deserialize(&mut std::io::Cursor::new(bytes))
                .expect("an interval's histogram decodes");
            HlogInterval {
                tag: i.tag().map_or(String::new(), |t| t.as_str().to_string()),
                start_s: i.start_timestamp().as_secs_f64(),
                length_s: i.duration().as_secs_f64(),
                max: i.max(),
                histogram,
            }
        })
        .collect()
}

/// Standard base64 (the interval log's histograms), padding allowed.
fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .unwrap_or_else(|| panic!("{:?} is not base64", c as char)) as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes_what_it_should() {
    assert_eq!(base64_decode("aGlzdA=="), b"hist");
    assert_eq!(base64_decode("SEdSTQ"), b"HGRM");
    assert_eq!(base64_decode(""), b"");
}

/// A kernel record's or a culprit's name and detail as the report shows them
/// (`report::culprit`): the words the tests compare with what a user reads.
pub trait Words {
    fn name(&self) -> String;
    fn detail(&self) -> String;
}

impl Words for jitterscope::model::Interruption {
    fn name(&self) -> String {
        jitterscope::report::culprit::name(&self.who)
    }

    fn detail(&self) -> String {
        jitterscope::report::culprit::detail(&self.who)
    }
}
