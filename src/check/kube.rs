//! `check` on a Kubernetes node: the kubelet's static CPU manager promises each container of a
//! Guaranteed pod CPUs of its own (`system::kubelet`). Every task, kernel thread or device
//! interrupt seen on such a CPU that is not of that pod broke the promise; this names who —
//! another pod's container, a container outside Kubernetes, the kubelet, a process of the
//! host, a kernel thread, an interrupt — by the cgroup of the task seen there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::judge::Finding;
use super::observe::{Promise, Seen};
use crate::model::{Cpu, CulpritClass, Nanos, Who};
use crate::system::container::{cgroup_paths, parse_cgroup_path, Names};
use crate::system::kubelet::CpuManagerState;

/// The kubelet's checkpoint as a check reads it, with the pods' names.
#[derive(Debug, Clone)]
pub struct Kubelet {
    pub file: PathBuf,
    pub state: CpuManagerState,
    /// `namespace/name` by pod UID (`system::kubelet::pod_names`).
    pub pod_names: HashMap<String, String>,
}

impl Kubelet {
    /// `namespace/name` of a pod, else `uid <UID>`.
    pub fn pod(&self, uid: &str) -> String {
        self.pod_names
            .get(uid)
            .cloned()
            .unwrap_or_else(|| format!("uid {uid}"))
    }
}

/// Who owns a checked CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuOwner {
    pub cpu: Cpu,
    /// None: no container owns it (the default set, or a CPU the kubelet does not give out).
    pub pod_uid: Option<String>,
    /// `namespace/name`, where the kubelet's log directories name the pod.
    pub pod: Option<String>,
    pub container: Option<String>,
}

/// What kind of culprit broke a container's exclusive CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intruder {
    /// The pod's own task (not a breach: listed apart).
    OwnPod,
    /// A container of another pod.
    OtherPod,
    /// A container outside Kubernetes (podman, docker).
    Container,
    /// The kubelet (its comm, or the `kubelet.service` cgroup).
    Kubelet,
    /// A process of the host, in no container.
    Process,
    KernelThread,
    Interrupt,
}

impl Intruder {
    pub fn words(self) -> &'static str {
        match self {
            Intruder::OwnPod => "the pod's own task",
            Intruder::OtherPod => "another pod's container",
            Intruder::Container => "a container outside Kubernetes",
            Intruder::Kubelet => "the kubelet",
            Intruder::Process => "a process of the host",
            Intruder::KernelThread => "a kernel thread",
            Intruder::Interrupt => "a device interrupt",
        }
    }
}

/// One culprit seen on a container's exclusive CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breach {
    pub cpu: Cpu,
    pub pod_uid: String,
    pub pod: Option<String>,
    pub container: String,
    pub by: Intruder,
    /// The culprit as the findings name it (`sh[4121]`, `kworker/1:1 vmstat_update`).
    pub name: String,
    pub pid: Option<u32>,
    /// Where it lives: `pod prod/feed container parser`, `container js-x`, the cgroup path, or
    /// why that is unknown.
    pub detail: String,
    pub promise: Promise,
    pub count: u64,
    pub time_ns: Nanos,
    pub longest_ns: Nanos,
}

/// The Kubernetes part of a check's report (`kubernetes` in the JSON form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeReport {
    pub state_file: String,
    /// The CPU manager's policy: `static`, or `none` (no exclusive CPUs).
    pub policy: String,
    pub default_cpus: Vec<Cpu>,
    /// Who owns each checked CPU.
    pub owners: Vec<CpuOwner>,
    /// Culprits seen on exclusive CPUs that are not of the owning pod, largest time first per
    /// CPU.
    pub breaches: Vec<Breach>,
    /// The owning pods' own tasks seen there (their CPUs are theirs to use).
    pub own: Vec<Breach>,
    /// What the checkpoint says beyond the owners (`policy none: …`), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Whether a culprit row counts against a container's exclusive CPU: tasks, kernel threads
/// and device interrupts; ticks, IPIs, the host and the SMT sibling have promises of their own.
fn counts(promise: Promise, class: Option<CulpritClass>) -> bool {
    if promise == Promise::QuietSibling {
        return false;
    }
    match class {
        Some(CulpritClass::Task | CulpritClass::Kthread | CulpritClass::Kworker) => true,
        Some(CulpritClass::Irq) => true,
        Some(CulpritClass::Softirq) => promise == Promise::NoDeviceIrqs,
        _ => false,
    }
}

/// Who a task seen on `owner_uid`'s CPU is, by its cgroup under `proc_root`.
fn task_intruder(
    pid: u32,
    comm: &str,
    owner_uid: &str,
    proc_root: &Path,
    names: &mut Names,
    pod_names: &HashMap<String, String>,
) -> (Intruder, String) {
    let Some(text) = crate::system::container::proc_cgroup(proc_root, pid) else {
        let intruder = if comm == "kubelet" {
            Intruder::Kubelet
        } else {
            Intruder::Process
        };
        return (
            intruder,
            "ended before the check did: its cgroup is unknown".into(),
        );
    };
    let paths = cgroup_paths(&text);
    if let Some(c) = paths.iter().find_map(|p| parse_cgroup_path(p)) {
        let name = names.name(&c);
        return match &c.pod_uid {
            Some(uid) if uid == owner_uid => {
                (Intruder::OwnPod, format!("container {}", name.container))
            }
            Some(uid) => {
                let pod = pod_names.get(uid).map_or(uid.as_str(), |n| n.as_str());
                (
                    Intruder::OtherPod,
                    format!("pod {pod} container {}", name.container),
                )
            }
            None => (
                Intruder::Container,
                format!("{} container {}", c.runtime.name(), name.container),
            ),
        };
    }
    // The unified hierarchy's path first; under a hybrid layout it may be the root while a
    // v1 hierarchy (systemd's) says more.
    let path = paths
        .iter()
        .find(|p| **p != "/")
        .or(paths.first())
        .copied()
        .unwrap_or("/")
        .to_string();
    if comm == "kubelet" || paths.iter().any(|p| p.contains("kubelet.service")) {
        (Intruder::Kubelet, format!("cgroup {path}"))
    } else {
        (Intruder::Process, format!("cgroup {path}"))
    }
}

/// The Kubernetes part of a check: who owns each checked CPU, and who broke an owner's
/// exclusive CPU among the culprits of `findings`. Tasks are placed by their cgroups under
/// `proc_root` (`/proc`), containers named by `names`.
pub fn report(
    k: &Kubelet,
    cpus: &[Cpu],
    findings: &[Finding],
    proc_root: &Path,
    names: &mut Names,
) -> KubeReport {
    let owners: Vec<CpuOwner> = cpus
        .iter()
        .map(|&cpu| match k.state.owner(cpu) {
            Some(e) => CpuOwner {
                cpu,
                pod_uid: Some(e.pod_uid.clone()),
                pod: k.pod_names.get(&e.pod_uid).cloned(),
                container: Some(e.container.clone()),
            },
            None => CpuOwner {
                cpu,
                pod_uid: None,
                pod: None,
                container: None,
            },
        })
        .collect();
    let mut breaches = Vec::new();
    let mut own = Vec::new();
    for f in findings {
        let Some(owner) = k.state.owner(f.cpu) else {
            continue;
        };
        for s in f.seen.iter().filter(|s| counts(f.promise, s.class)) {
            let b = breach(k, owner, f, s, proc_root, names);
            if b.by == Intruder::OwnPod {
                own.push(b);
            } else {
                breaches.push(b);
            }
        }
    }
    let order = |a: &Breach, b: &Breach| a.cpu.cmp(&b.cpu).then(b.time_ns.cmp(&a.time_ns));
    breaches.sort_by(order);
    own.sort_by(order);
    let note = match (k.state.policy.as_str(), k.state.exclusive.is_empty()) {
        ("none", _) => Some("policy none: the kubelet gives no container CPUs of its own; every container shares the default set".to_string()),
        (_, true) => Some(format!("policy {}: no container has CPUs of its own now (no Guaranteed pod with an integer CPU request runs here)", k.state.policy)),
        _ => None,
    };
    KubeReport {
        state_file: k.file.display().to_string(),
        policy: k.state.policy.clone(),
        default_cpus: k.state.default_cpus.clone(),
        owners,
        breaches,
        own,
        note,
    }
}

fn breach(
    k: &Kubelet,
    owner: &crate::system::kubelet::Exclusive,
    f: &Finding,
    s: &Seen,
    proc_root: &Path,
    names: &mut Names,
) -> Breach {
    let (by, pid, detail) = match (&s.class, &s.who) {
        (Some(CulpritClass::Task), Some(Who::Task { comm, pid, .. })) => {
            let (by, detail) =
                task_intruder(*pid, comm, &owner.pod_uid, proc_root, names, &k.pod_names);
            (by, Some(*pid), detail)
        }
        (Some(CulpritClass::Irq | CulpritClass::Softirq), _) => {
            (Intruder::Interrupt, None, s.detail.clone())
        }
        _ => (Intruder::KernelThread, None, s.detail.clone()),
    };
    // A task's detail is its policy, an interrupt's its number: the name says who it is.
    let name = if s.detail.is_empty() || pid.is_some() || by == Intruder::Interrupt {
        s.name.clone()
    } else {
        format!("{} {}", s.name, s.detail)
    };
    Breach {
        cpu: f.cpu,
        pod_uid: owner.pod_uid.clone(),
        pod: k.pod_names.get(&owner.pod_uid).cloned(),
        container: owner.container.clone(),
        by,
        name,
        pid,
        detail,
        promise: f.promise,
        count: s.count,
        time_ns: s.time_ns,
        longest_ns: s.longest_ns,
    }
}

/// `pod prod/trader container engine` (the UID where no log directory names the pod).
pub fn owner_words(pod: Option<&str>, uid: &str, container: &str) -> String {
    match pod {
        Some(p) => format!("pod {p} container {container}"),
        None => format!("pod {uid} container {container}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::judge::{How, Verdict};
    use crate::system::container::NameSources;
    use crate::system::kubelet::Exclusive;

    const UID: &str = "8f1b2c3d-4e5f-6789-abcd-ef0123456789";
    const OTHER: &str = "11111111-2222-3333-4444-555555555555";
    const ID: &str = "cad61e2393fd6075d215e1856af27a14104533c3289c6433c26aaa6aab0c13b6";

    fn task(comm: &str, pid: u32, time_ns: Nanos) -> Seen {
        Seen {
            class: Some(CulpritClass::Task),
            name: format!("{comm}[{pid}]"),
            count: 1,
            time_ns,
            longest_ns: time_ns,
            who: Some(Who::Task {
                comm: comm.into(),
                pid,
                policy: 0,
                container: None,
            }),
            ..Default::default()
        }
    }

    fn finding(cpu: Cpu, promise: Promise, seen: Vec<Seen>) -> Finding {
        Finding {
            cpu,
            promise,
            verdict: Verdict::NotConfigured,
            configured: false,
            settings: vec![],
            count: seen.iter().map(|s| s.count).sum(),
            time_ns: seen.iter().map(|s| s.time_ns).sum(),
            how: How::Measured,
            seen,
            why: String::new(),
            fixes: vec![],
            remains: vec![],
        }
    }

    /// A fake `/proc`: pid 10 in the owning pod, 11 in another pod, 12 the kubelet, 13 a
    /// session's process (a hybrid layout), 14 a podman container; 15 has ended.
    fn fake_proc() -> tempfile::TempDir {
        let proc = tempfile::tempdir().unwrap();
        let cg = |pid: u32, text: &str| {
            let d = proc.path().join(pid.to_string());
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("cgroup"), text).unwrap();
        };
        let under = |uid: &str, id: &str| {
            format!(
                "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{id}.scope\n",
                uid.replace('-', "_")
            )
        };
        cg(10, &under(UID, ID));
        cg(11, &under(OTHER, &ID.replace("cad6", "dad6")));
        cg(12, "0::/system.slice/kubelet.service\n");
        // A hybrid layout: the unified hierarchy's root, systemd's v1 hierarchy says more.
        cg(
            13,
            "1:name=systemd:/user.slice/user-0.slice/session-1.scope\n0::/\n",
        );
        cg(14, &format!("0::/libpod_parent/libpod-{ID}\n"));
        proc
    }

    fn kubelet() -> Kubelet {
        Kubelet {
            file: "/var/lib/kubelet/cpu_manager_state".into(),
            state: CpuManagerState {
                policy: "static".into(),
                default_cpus: vec![0],
                exclusive: vec![Exclusive {
                    pod_uid: UID.into(),
                    container: "engine".into(),
                    cpus: vec![1],
                }],
                checksum: None,
            },
            pod_names: [(UID.to_string(), "prod/trader".to_string())].into(),
        }
    }

    #[test]
    fn culprits_on_an_exclusive_cpu_are_named_by_their_cgroups() {
        let proc = fake_proc();
        let k = kubelet();
        let kworker = Seen {
            class: Some(CulpritClass::Kworker),
            name: "kworker/1:1".into(),
            detail: "vmstat_update".into(),
            count: 3,
            time_ns: 30,
            ..Default::default()
        };
        let irq = Seen {
            class: Some(CulpritClass::Irq),
            name: "virtio0".into(),
            detail: "IRQ 24".into(),
            count: 1,
            time_ns: 5,
            ..Default::default()
        };
        let tick = Seen {
            class: Some(CulpritClass::TimerTick),
            name: "tick".into(),
            count: 250,
            time_ns: 1000,
            ..Default::default()
        };
        let findings = vec![
            finding(
                1,
                Promise::NoOtherTasks,
                vec![
                    task("engine", 10, 900),
                    task("parser", 11, 800),
                    task("kubelet", 12, 700),
                    task("bash", 13, 600),
                    task("sh", 14, 500),
                    task("cron", 15, 400),
                ],
            ),
            finding(1, Promise::NoPerCpuWork, vec![kworker]),
            finding(1, Promise::NoDeviceIrqs, vec![irq]),
            finding(1, Promise::TickStopped, vec![tick]),
            // CPU 0 is no container's: nothing there is a breach.
            finding(0, Promise::NoOtherTasks, vec![task("bash", 13, 600)]),
        ];
        let mut names = Names::new(NameSources {
            kubelet_logs: proc.path().join("none"),
            docker_containers: proc.path().join("none"),
            ask_runtimes: false,
        });
        let r = report(&k, &[0, 1], &findings, proc.path(), &mut names);
        assert_eq!(r.owners[0].pod_uid, None);
        assert_eq!(r.owners[1].container.as_deref(), Some("engine"));
        assert_eq!(r.owners[1].pod.as_deref(), Some("prod/trader"));
        assert_eq!(r.own.len(), 1);
        assert_eq!(r.own[0].pid, Some(10));
        let by: Vec<(Intruder, &str)> =
            r.breaches.iter().map(|b| (b.by, b.name.as_str())).collect();
        assert_eq!(
            by,
            vec![
                (Intruder::OtherPod, "parser[11]"),
                (Intruder::Kubelet, "kubelet[12]"),
                (Intruder::Process, "bash[13]"),
                (Intruder::Container, "sh[14]"),
                (Intruder::Process, "cron[15]"),
                (Intruder::KernelThread, "kworker/1:1 vmstat_update"),
                (Intruder::Interrupt, "virtio0"),
            ]
        );
        assert!(r
            .breaches
            .iter()
            .all(|b| b.cpu == 1 && b.container == "engine"));
        assert_eq!(
            r.breaches[0].detail,
            format!("pod {OTHER} container dad61e2393fd")
        );
        assert_eq!(
            r.breaches[2].detail,
            "cgroup /user.slice/user-0.slice/session-1.scope"
        );
        assert_eq!(r.breaches[3].detail, "podman container cad61e2393fd");
        assert!(
            r.breaches[4].detail.contains("ended before"),
            "{:?}",
            r.breaches[4]
        );
        assert_eq!(r.note, None);
    }
}
