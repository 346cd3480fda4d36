//! jitterscope and real containers: podman with runc on this machine, offline: a container's
//! cgroup read as that container, and `watch --container` / `watch --cgroup` of one.

mod common;

use common::containers::Podman;
use common::skip_bpf;
use jitterscope::model::CulpritClass;
use jitterscope::report::runfile::RunFile;
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

/// The processes in a container's cgroup now (host pids), from its v2 `cgroup.procs`.
fn procs_of(pid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a v2 cgroup path")
        .to_string();
    let mount = jitterscope::system::cgroup::live_v2_mount().unwrap();
    let dir = mount.join(path.trim_start_matches('/'));
    let mut v: Vec<u32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Watches `target` (`--container NAME` or `--cgroup PATH`) of a container spinning on CPU 1
/// (a subshell spins; its shell forks a short-lived subshell every second) while a second
/// container spins on CPU 1 too; after the watch began, a spinning process is `podman exec`ed
/// into the watched container. The competing container's shell is a `task` culprit of the
/// watched threads, and the exec'ed process and the forks are watched threads created during
/// the watch.
fn watch_a_container(test: &str, flag: &str, by_cgroup: bool) {
    if skip_bpf(test) {
        return;
    }
    let _cpus = common::exclusive();
    let podman = Podman::new().unwrap();
    let name = format!("js-cw-{}", if by_cgroup { "g" } else { "n" });
    let a = podman
        .start(
            &name,
            "1",
            "while :; do :; done & while :; do sleep 1; (:); done",
        )
        .unwrap();
    let b = podman
        .start(&format!("{name}-rival"), "1", "while :; do :; done")
        .unwrap();
    let (a_pid, b_pid) = (a.pid().unwrap(), b.pid().unwrap());
    let target = if by_cgroup {
        let text = std::fs::read_to_string(format!("/proc/{a_pid}/cgroup")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap()
            .to_string()
    } else {
        name.clone()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut child = js()
        .args([
            "watch",
            flag,
            &target,
            "--duration",
            "6s",
            "--no-tui",
            "--metrics",
        ])
        .arg(dir.path().join("watch.prom"))
        .arg("--output")
        .arg(dir.path().join("w"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The banner is the first line: the probes are loaded and the cgroup is followed.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut banner = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut banner).unwrap();
    let before = procs_of(a_pid);
    std::thread::sleep(std::time::Duration::from_millis(500));
    a.exec_detached("while :; do :; done").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let exec_pid = procs_of(a_pid)
        .into_iter()
        .filter(|p| !before.contains(p))
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.contains("while :; do :; done"))
        })
        .unwrap_or_else(|| panic!("the exec'ed process is not in {name}'s cgroup"));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{banner}{rest}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    let text = std::fs::read_to_string(common::run_file_in(&dir.path().join("w"))).unwrap();
    let run: RunFile = serde_json::from_str(&text).unwrap();
    let w = run.watch.as_ref().unwrap();
    let path = format!("/libpod_parent/libpod-{}", a.id);
    assert_eq!(w.cgroup.as_deref(), Some(path.as_str()), "{said}");
    if by_cgroup {
        assert_eq!(w.target, format!("--cgroup {path}"));
        assert_eq!(w.container, None);
    } else {
        assert_eq!(
            w.target,
            format!("container {name} (podman {})", &a.id[..12])
        );
        let c = w.container.as_ref().unwrap();
        assert_eq!(
            (c.name.as_str(), c.runtime.as_str(), c.id.as_str()),
            (name.as_str(), "podman", a.id.as_str())
        );
        assert!(said.contains(&w.target), "{said}");
    }
    let rival = format!("sh[{b_pid}]");
    // The rival is a row of its own, or — beside the watched container's own shells, which
    // interrupt each other — among the processes of the row of every `sh`.
    let rival_row = |c: &jitterscope::report::runfile::CulpritEntry| {
        c.class == CulpritClass::Task
            && (c.name == rival
                || c.name == "sh"
                    && c.processes
                        .as_ref()
                        .is_some_and(|p| p.listed.iter().any(|e| e.pid == b_pid)))
    };
    assert!(
        run.threads.iter().any(|t| t.culprits.iter().any(rival_row)),
        "the rival container's shell {rival} is no culprit: {:?}\n{said}",
        run.threads
    );
    assert!(run.culprits.iter().any(rival_row), "{:?}", run.culprits);
    // The metrics of a container watch name the rival by its container, never by an id.
    let prom = std::fs::read_to_string(dir.path().join("watch.prom")).unwrap();
    let rival_label = format!("container=\"{name}-rival\"");
    assert!(
        prom.lines()
            .any(|l| l.contains("class=\"task\"") && l.contains(&rival_label)),
        "no task series labelled {rival_label}:\n{prom}"
    );
    assert!(
        !prom.contains(&b.id[..12]),
        "a container id in the metrics:\n{prom}"
    );
    let created: Vec<_> = run
        .threads
        .iter()
        .filter(|t| t.created_ns.is_some())
        .collect();
    assert!(
        created
            .iter()
            .any(|t| t.tid == exec_pid && t.pid == exec_pid && t.name == "sh"),
        "the exec'ed process {exec_pid} is not a thread created during the watch (named by what it ran, sh): {:?}",
        run.threads
    );
    assert!(
        created
            .iter()
            .any(|t| t.tid != exec_pid && t.pid != a_pid && t.pid != exec_pid),
        "no fork inside the container was watched: {:?}",
        run.threads
    );
    drop((a, b));
}

#[test]
fn watch_container_by_name_follows_its_threads_and_names_a_rival_container() {
    watch_a_container(
        "watch_container_by_name_follows_its_threads_and_names_a_rival_container",
        "--container",
        false,
    );
}

#[test]
fn watch_cgroup_follows_a_containers_cgroup() {
    watch_a_container("watch_cgroup_follows_a_containers_cgroup", "--cgroup", true);
}

/// Bad targets: one line, exit 2, saying what, why and how to find a good one.
#[test]
fn bad_cgroup_and_container_targets_are_usage_errors() {
    common::usage_error(
        &["watch", "--cgroup", "/nope", "--no-tui"],
        "--cgroup /nope: no such cgroup:",
    );
    common::usage_error(
        &["watch", "--cgroup", "nope", "--no-tui"],
        "--cgroup nope: not an absolute path",
    );
    common::usage_error(
        &["watch", "--container", "js-no-such-container", "--no-tui"],
        "--container js-no-such-container: no such container (podman: no such container;",
    );
    common::usage_error(
        &["watch", "--container", "123456789abc", "--no-tui"],
        "is named for a container id starting with 123456789abc",
    );
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
