//! jitterscope and real containers: podman with runc on this machine, offline.

mod common;

use common::containers::Podman;
use common::skip_bpf;
use jitterscope::system::container::{container_of_pid, NameSources, Names, Runtime};

/// A real podman container's cgroup path is read as that container: its runtime, its full
/// id, and its name from podman itself.
#[test]
fn a_podman_container_is_known_by_its_cgroup() {
    if skip_bpf("a_podman_container_is_known_by_its_cgroup") {
        return;
    }
    let podman = Podman::new().unwrap();
    let c = podman
        .start("js-test-known", "0", "while :; do sleep 1; done")
        .unwrap();
    let pid = c.pid().unwrap();
    let found = container_of_pid(std::path::Path::new("/proc"), pid)
        .unwrap_or_else(|| panic!("pid {pid} of {}: no container in its cgroups", c.name));
    assert_eq!(found.runtime, Runtime::Podman);
    assert_eq!(found.id, c.id);
    assert_eq!(found.pod_uid, None);
    let mut names = Names::new(NameSources {
        kubelet_logs: "/nonexistent".into(),
        docker_containers: "/nonexistent".into(),
        ask_runtimes: true,
    });
    // podman answers with the container's name (CONTAINERS_CONF is only for starting it).
    assert_eq!(names.name(&found).container, "js-test-known");
    assert_eq!(
        container_of_pid(std::path::Path::new("/proc"), std::process::id()),
        None
    );
}

fn js() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_jitterscope"))
}

fn show(o: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The run file a session wrote into `dir`.
fn run_file(dir: &std::path::Path) -> (std::path::PathBuf, serde_json::Value) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                if v.get("culprits").is_some() {
                    return (p, v);
                }
            }
        }
    }
    panic!("no run file in {}", dir.display());
}

/// The competing container's task is labelled with the container's name in the text report,
/// the Markdown report, the run file's culprit entries and the metrics file.
fn labelled_everywhere(o: &std::process::Output, dir: &std::path::Path, prom: &std::path::Path) {
    assert!(o.status.success(), "{}", show(o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("in container js-noise (podman)"),
        "text report: {}",
        show(o)
    );
    let (path, run) = run_file(dir);
    let labelled: Vec<&serde_json::Value> = run["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["who"]["container"]["name"] == "js-noise")
        .collect();
    assert!(!labelled.is_empty(), "run file: {}", run["culprits"]);
    let c = &labelled[0]["who"]["container"];
    assert_eq!(c["runtime"], "podman");
    assert_eq!(c["id"].as_str().map(str::len), Some(12));
    assert_eq!(labelled[0]["class"], "task");
    let md = js()
        .arg("report")
        .arg(&path)
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert!(md.status.success(), "{}", show(&md));
    assert!(
        String::from_utf8_lossy(&md.stdout).contains("in container js-noise (podman)"),
        "markdown report: {}",
        show(&md)
    );
    let metrics = std::fs::read_to_string(prom).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("jitterscope_stolen_seconds_total")
                && l.contains("class=\"task\"")
                && l.contains("container=\"js-noise\"")),
        "metrics file: {metrics}"
    );
}

/// A run on CPUs 0 and 1 with a spinning container on CPU 1: its task is named by container.
#[test]
fn a_run_labels_a_containers_competing_task_by_container_everywhere() {
    if skip_bpf("a_run_labels_a_containers_competing_task_by_container_everywhere") {
        return;
    }
    // One container named js-noise at a time, and the CPUs to this test alone.
    let _cpus = common::exclusive();
    let podman = Podman::new().unwrap();
    let noise = podman
        .start("js-noise", "1", "while :; do :; done")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("run.prom");
    let o = js()
        .args([
            "run",
            "--cpus",
            "0,1",
            "--duration",
            "3s",
            "--warmup",
            "500ms",
        ])
        .args(["--no-tui", "--metrics"])
        .arg(&prom)
        .arg("--output")
        .arg(dir.path())
        .output()
        .unwrap();
    drop(noise);
    labelled_everywhere(&o, dir.path(), &prom);
    // A stall's culprits carry it too.
    let (_, run) = run_file(dir.path());
    let stalls = run["stalls"].as_array().unwrap();
    let in_stall = stalls.iter().any(|s| {
        let culprits = s["culprits"].as_array().unwrap();
        (culprits.iter()).any(|c| c["container"]["name"] == "js-noise" && c["class"] == "task")
    });
    assert!(
        in_stall,
        "no stall's culprit in js-noise: {}",
        run["stalls"]
    );
}

/// A watch of a spinner outside any container, pinned to CPU 1, with the container competing
/// for that CPU: the container's task is named by container.
#[test]
fn a_watch_labels_a_containers_competing_task_by_container_everywhere() {
    if skip_bpf("a_watch_labels_a_containers_competing_task_by_container_everywhere") {
        return;
    }
    // One container named js-noise at a time, and the CPUs to this test alone.
    let _cpus = common::exclusive();
    let podman = Podman::new().unwrap();
    let noise = podman
        .start("js-noise", "1", "while :; do :; done")
        .unwrap();
    let target = common::Competitor::start(1);
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("watch.prom");
    let o = js()
        .args(["watch", "--pid", &target.pid().to_string(), "--cpus", "1"])
        .args(["--duration", "3s", "--no-tui", "--metrics"])
        .arg(&prom)
        .arg("--output")
        .arg(dir.path())
        .output()
        .unwrap();
    drop(target);
    drop(noise);
    labelled_everywhere(&o, dir.path(), &prom);
}
