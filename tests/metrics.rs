//! The metrics file as Prometheus meets it: a real node_exporter (Debian's
//! `prometheus-node-exporter`, loopback only, a free port, a temporary textfile directory,
//! ended by its pid) serves the files of a short `run` and a `watch` with injected kworker
//! noise, and its `/metrics` names the injected culprit's stolen seconds; `promtool check
//! metrics` accepts each file. Needs root (outside CI, JITTERSCOPE_SKIP_BPF=1 skips the BPF
//! test by name); the flags' mistakes need neither.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

fn js() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jitterscope"))
}

fn show(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// node_exporter with the textfile collector alone, on 127.0.0.1 and a port that was free;
/// killed by its pid on drop.
struct NodeExporter {
    child: Child,
    port: u16,
}

impl NodeExporter {
    fn start(textfile_dir: &Path) -> NodeExporter {
        // A port the kernel just gave out, released for node_exporter to take.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!(
                "--collector.textfile.directory={}",
                textfile_dir.display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-node-exporter is not installed: run scripts/deps.sh as root");
        let ne = NodeExporter { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if ne.try_scrape().is_some() {
                return ne;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("node_exporter did not answer on 127.0.0.1:{port} within 10 s");
    }

    fn try_scrape(&self) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .ok()?;
        let mut response = String::new();
        s.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let ok = head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200");
        ok.then(|| body.to_string())
    }

    fn scrape(&self) -> String {
        self.try_scrape()
            .expect("node_exporter's /metrics did not answer 200")
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The samples of `name` in a scrape: labels and value.
fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, labels) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                return None;
            }
            let labels = labels
                .trim_end_matches('}')
                .split("\",")
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once("=\"")?;
                    Some((k.to_string(), v.trim_end_matches('"').to_string()))
                })
                .collect();
            Some((labels, value.parse().ok()?))
        })
        .collect()
}

/// The value of the sample of `name` whose labels include all of `want`.
fn value(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    samples(text, name)
        .into_iter()
        .find(|(l, _)| want.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)))
        .map(|s| s.1)
}

fn promtool_accepts(file: &Path) {
    let o = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .expect(
            "promtool is not installed (Debian's prometheus package): run scripts/deps.sh as root",
        );
    assert!(
        o.status.success(),
        "promtool check metrics refused {}:\n{}",
        file.display(),
        show(&o)
    );
}

/// `echo 1 > /proc/sys/vm/stat_refresh` every 20 ms: refresh_vm_stats on every CPU's
/// kworker, until dropped.
struct StatRefresh {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl StatRefresh {
    fn start() -> StatRefresh {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let _ = std::fs::write("/proc/sys/vm/stat_refresh", "1");
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        StatRefresh {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for StatRefresh {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

const KWORKER_ON_1: [(&str, &str); 3] = [
    ("class", "kworker"),
    ("cpu", "1"),
    ("culprit", "refresh_vm_stats"),
];

/// A short run with `--inject kworker@1:50`; its file is there while it runs, and rewritten
/// at the end.
fn run_with_metrics(textfiles: &Path, runs: &Path) {
    let file = textfiles.join("run.prom");
    let mut child = js()
        .args([
            "run",
            "--cpus",
            "0,1",
            "--duration",
            "3s",
            "--warmup",
            "500ms",
        ])
        .args([
            "--no-tui",
            "--inject",
            "kworker@1:50",
            "--metrics-interval",
            "1s",
        ])
        .arg("--metrics")
        .arg(&file)
        .arg("--output")
        .arg(runs)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !file.exists() && Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = std::fs::read_to_string(&file).unwrap_or_default();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        during.contains("jitterscope_info"),
        "the metrics file was not written while the run went on"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("metrics:"));
    assert_ne!(std::fs::read_to_string(&file).unwrap(), during);
    promtool_accepts(&file);
}

/// A watch of a busy shell loop on CPU 1 while stat_refresh runs its kworkers.
fn watch_with_metrics(textfiles: &Path, runs: &Path) {
    let file = textfiles.join("watch.prom");
    let target = Competitor::start(1);
    let noise = StatRefresh::start();
    let o = js()
        .args(["watch", "--pid", &target.pid().to_string(), "--cpus", "1"])
        .args(["--duration", "3s", "--no-tui", "--metrics"])
        .arg(&file)
        .arg("--output")
        .arg(runs)
        .output()
        .unwrap();
    drop(noise);
    drop(target);
    assert!(o.status.success(), "{}", show(&o));
    promtool_accepts(&file);
}

#[test]
fn node_exporter_serves_the_injected_culprits_stolen_seconds_from_a_run_and_a_watch() {
    if skip_bpf("node_exporter_serves_the_injected_culprits_stolen_seconds_from_a_run_and_a_watch")
    {
        return;
    }
    let _cpus = exclusive();
    let textfiles = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let ne = NodeExporter::start(textfiles.path());
    run_with_metrics(textfiles.path(), runs.path());
    watch_with_metrics(textfiles.path(), runs.path());
    let scraped = ne.scrape();
    assert_eq!(
        value(&scraped, "node_textfile_scrape_error", &[]),
        Some(0.0),
        "{scraped}"
    );
    for source in ["run", "watch"] {
        let mut want = KWORKER_ON_1.to_vec();
        want.push(("source", source));
        let stolen = value(&scraped, "jitterscope_stolen_seconds_total", &want);
        assert!(
            stolen.is_some_and(|s| s > 0.0),
            "{source}: no stolen seconds of refresh_vm_stats on CPU 1 in node_exporter's /metrics: {stolen:?}\n{}",
            scraped
                .lines()
                .filter(|l| l.starts_with("jitterscope_stolen_seconds_total"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let info = samples(&scraped, "jitterscope_info");
        assert!(
            info.iter().any(|(l, v)| *v == 1.0
                && l.get("source").is_some_and(|s| s == source)
                && l.get("mode").is_some_and(|m| m == source)),
            "{info:?}"
        );
    }
    // node_exporter kept the types: a counter is a counter, not an untyped family.
    assert!(scraped.contains("# TYPE jitterscope_stolen_seconds_total counter"));
    assert!(scraped.contains("# TYPE jitterscope_interruption_seconds histogram"));
    let transit = value(
        &scraped,
        "jitterscope_transit_seconds_count",
        &[("consumer", "accumulator"), ("source", "run")],
    );
    assert!(transit.is_some_and(|n| n > 0.0), "{transit:?}");
    for source in ["run", "watch"] {
        let stalls = value(
            &scraped,
            "jitterscope_stall_seconds_count",
            &[("cpu", "1"), ("source", source)],
        );
        assert!(stalls.is_some_and(|n| n > 0.0), "{source}: {stalls:?}");
    }
    let thread = value(
        &scraped,
        "jitterscope_thread_interruption_seconds_count",
        &[("thread", "sh"), ("source", "watch")],
    );
    assert!(thread.is_some_and(|n| n > 0.0), "{thread:?}");
}

#[test]
fn metrics_flag_mistakes_are_usage_errors() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    let run = ["run", "--cpus", "0,1", "--no-probes", "--output", dir];
    let with = |extra: &[&str]| -> Vec<String> {
        run.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let missing = format!("{dir}/no/such/dir/x.prom");
    let args = with(&["--metrics", &missing]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "does not exist");
    let args = with(&["--metrics", dir]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "is a directory");
    let file = format!("{dir}/x.prom");
    let args = with(&["--metrics", &file, "--metrics-interval", "0s"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "zero is not a usable metrics interval");
    let args = with(&["--metrics-interval", "5s"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    usage_error(&args, "--metrics");
    usage_error(
        &["probe", "--cpus", "0", "--metrics", &missing],
        "does not exist",
    );
    usage_error(
        &[
            "watch",
            "--pid",
            "1",
            "--output",
            dir,
            "--metrics",
            &missing,
        ],
        "does not exist",
    );
    assert!(!Path::new(&file).exists());
}
