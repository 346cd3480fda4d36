//! perf as the independent recorder in tests: tracefs mounted while needed, `perf record`
//! started and ended by its pid, `perf script` of its file.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jitterscope::workload::clock::monotonic_ns;

const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs for perf's tracepoints when it is not mounted, and unmounts it on drop
/// (also when a test fails) — only if it mounted it.
pub struct Tracefs {
    mounted: bool,
}

impl Tracefs {
    pub fn ensure() -> Tracefs {
        if Path::new(TRACEFS).join("events").is_dir() {
            return Tracefs { mounted: false };
        }
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "cannot mount tracefs at {TRACEFS} (perf's tracepoints need it)"
        );
        Tracefs { mounted: true }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(TRACEFS).status();
        }
    }
}

/// perf record, ended with SIGINT by its pid (it writes its file then), killed if it hangs.
pub struct PerfRecord(pub std::process::Child);

impl PerfRecord {
    /// Records `tracepoints` of `cpus` (None: every CPU), perf itself on `home`.
    pub fn start(
        out: &Path,
        tracepoints: &[String],
        cpus: Option<&str>,
        home: usize,
    ) -> PerfRecord {
        let mut cmd = Command::new("taskset");
        // perf's own process stays on one CPU, off the one compared.
        cmd.args(["-c", &home.to_string(), "perf", "record", "-k", "mono"]);
        match cpus {
            Some(c) => cmd.args(["-C", c]),
            None => cmd.arg("-a"),
        };
        cmd.args(["-m", "4M", "-o"]).arg(out);
        for tp in tracepoints {
            cmd.args(["-e", tp]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start perf record");
        let mut p = PerfRecord(child);
        for _ in 0..100 {
            if std::fs::metadata(out).is_ok_and(|m| m.len() > 0) {
                break;
            }
            if let Ok(Some(status)) = p.0.try_wait() {
                let err = p.0.stderr.take().map(std::io::read_to_string);
                panic!("perf record exited at once ({status}): {err:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // perf attaches after it creates its file.
        std::thread::sleep(Duration::from_secs(1));
        p
    }

    pub fn stop(mut self) -> String {
        let pid = self.0.id() as i32;
        for _ in 0..50 {
            // SAFETY: a signal to the child we started, by its pid.
            unsafe { libc::kill(pid, libc::SIGINT) };
            std::thread::sleep(Duration::from_millis(200));
            if self.0.try_wait().is_ok_and(|s| s.is_some()) {
                break;
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        self.0
            .stderr
            .take()
            .map(std::io::read_to_string)
            .and_then(Result::ok)
            .unwrap_or_default()
    }
}

impl Drop for PerfRecord {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `perf script --ns` of a perf.data file, in the field list the check reads.
pub fn script(perf_data: &Path) -> Result<String, String> {
    let out = Command::new("perf")
        .args(["script", "--ns", "-F", "cpu,time,event,trace", "-i"])
        .arg(perf_data)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("perf script: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether perf is installed.
pub fn found() -> bool {
    Command::new("perf")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The noise: a competing thread on the consumer's CPU (busy 2 ms, asleep 38 ms) named
/// `verify-hog`, and `stat_refresh` writes from the producer's CPU every 50 ms.
pub struct Noise {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    pub hog_tid: u32,
}

impl Noise {
    pub fn start(producer: usize, consumer: usize) -> Noise {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = stop.clone();
        let hog = std::thread::Builder::new()
            .name("verify-hog".into())
            .spawn(move || {
                super::pin(0, consumer);
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() } as u32);
                while !s.load(Ordering::Relaxed) {
                    let t0 = monotonic_ns();
                    while monotonic_ns() - t0 < 2_000_000 {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(38));
                }
            })
            .unwrap();
        let s = stop.clone();
        let kworkers = std::thread::spawn(move || {
            super::pin(0, producer);
            while !s.load(Ordering::Relaxed) {
                std::fs::write("/proc/sys/vm/stat_refresh", "1").unwrap();
                // Every 20 ms: a refresh takes the quiet CPU's kworker only some 6 µs here,
                // and at 50 ms an 8 s run gave it 0.95 ms, under the 1 ms that is graded.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let hog_tid = rx.recv().unwrap();
        Noise {
            stop,
            threads: vec![hog, kworkers],
            hog_tid,
        }
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
