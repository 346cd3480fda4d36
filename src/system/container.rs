//! Containers and pods as the cgroup file system names them.
//!
//! A container runtime puts a container's processes in a cgroup whose last component carries
//! the container's id, under a parent that carries the pod's UID on Kubernetes:
//!
//! | runtime | systemd driver | cgroupfs driver |
//! |---|---|---|
//! | containerd (CRI) | `…/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` | `/kubepods/<qos>/pod<uid>/<id>` |
//! | CRI-O | `…/kubepods-<qos>-pod<uid>.slice/crio-<id>.scope` | `/kubepods/<qos>/pod<uid>/crio-<id>` |
//! | docker | `/system.slice/docker-<id>.scope` | `/docker/<id>` |
//! | podman | `/machine.slice/libpod-<id>.scope[/container]` | `/libpod_parent/libpod-<id>` |
//!
//! Guaranteed pods have no `<qos>` level. The systemd driver writes a pod UID's dashes as
//! underscores. `crio-conmon-<id>` and `libpod-conmon-<id>` hold the runtime's monitor, not
//! the container. Ids are 64 hex digits. Names come from the runtime (its CLI, or the files
//! the kubelet and docker keep) and are looked up once per id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::system::config::read_capped;

/// The runtime whose naming convention a cgroup path follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Runtime {
    Containerd,
    Crio,
    Docker,
    Podman,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Containerd => "containerd",
            Runtime::Crio => "cri-o",
            Runtime::Docker => "docker",
            Runtime::Podman => "podman",
        }
    }
}

/// A container as its cgroup path names it: the runtime, the full id and, on Kubernetes, the
/// pod's UID (with dashes) and QoS class.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerRef {
    pub runtime: Runtime,
    pub id: String,
    pub pod_uid: Option<String>,
    /// `guaranteed`, `burstable` or `besteffort`; None outside Kubernetes.
    pub qos: Option<&'static str>,
}

impl ContainerRef {
    /// The first 12 digits of the id, as `podman ps` and `docker ps` show it.
    pub fn short_id(&self) -> &str {
        &self.id[..12]
    }
}

fn is_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The container id in one path component, with the runtime its shape names.
fn component_id(c: &str) -> Option<(Runtime, &str)> {
    let bare = c.strip_suffix(".scope").unwrap_or(c);
    let shapes = [
        ("cri-containerd-", Runtime::Containerd),
        ("crio-", Runtime::Crio),
        ("docker-", Runtime::Docker),
        ("libpod-", Runtime::Podman),
    ];
    for (prefix, runtime) in shapes {
        if let Some(id) = bare.strip_prefix(prefix) {
            return is_id(id).then_some((runtime, id));
        }
    }
    None
}

/// The pod UID and QoS class one path component names (`kubepods-burstable-pod<uid>.slice`,
/// `kubepods-pod<uid>.slice`, or the cgroupfs driver's `pod<uid>`).
fn pod_component(c: &str) -> Option<String> {
    let bare = c.strip_suffix(".slice").unwrap_or(c);
    let (head, uid) = bare.rsplit_once("pod")?;
    if !(head.is_empty() || head.starts_with("kubepods")) {
        return None;
    }
    let uid = uid.replace('_', "-");
    let ok = uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    ok.then_some(uid)
}

fn qos_component(c: &str) -> Option<&'static str> {
    let bare = c.strip_suffix(".slice").unwrap_or(c);
    let bare = bare.strip_prefix("kubepods-").unwrap_or(bare);
    ["burstable", "besteffort"]
        .into_iter()
        .find(|q| bare == *q || bare.starts_with(&format!("{q}-pod")))
}

/// The container a cgroup path (as `/proc/PID/cgroup` shows it) belongs to, if it follows one
/// of the conventions above; the outermost container component wins (a container's own
/// sub-cgroups are still that container).
pub fn parse_cgroup_path(path: &str) -> Option<ContainerRef> {
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let kube = parts.first().is_some_and(|p| p.starts_with("kubepods"));
    let mut pod_uid = None;
    let mut qos = None;
    for (i, c) in parts.iter().enumerate() {
        if kube {
            if let Some(uid) = pod_component(c) {
                pod_uid = Some(uid);
            }
            qos = qos.or_else(|| qos_component(c));
        }
        if let Some((runtime, id)) = component_id(c) {
            return Some(ContainerRef {
                runtime,
                id: id.to_string(),
                qos: pod_uid.as_ref().map(|_| qos.unwrap_or("guaranteed")),
                pod_uid,
            });
        }
        // The cgroupfs drivers: a bare id under `/docker` or under a pod.
        if is_id(c) && i > 0 {
            let runtime = if parts[0] == "docker" {
                Runtime::Docker
            } else if pod_uid.is_some() {
                Runtime::Containerd
            } else {
                continue;
            };
            return Some(ContainerRef {
                runtime,
                id: c.to_string(),
                qos: pod_uid.as_ref().map(|_| qos.unwrap_or("guaranteed")),
                pod_uid,
            });
        }
    }
    None
}

/// The cgroup paths of `/proc/PID/cgroup`'s text, the unified (v2) one first.
pub fn cgroup_paths(text: &str) -> Vec<&str> {
    let mut v2 = Vec::new();
    let mut v1 = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(_), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" {
            v2.push(path);
        } else {
            v1.push(path);
        }
    }
    v2.extend(v1);
    v2
}

/// The container process `pid` runs in (by its `/proc/PID/cgroup`), None when it is in none
/// or is gone.
pub fn container_of_pid(proc_root: &Path, pid: u32) -> Option<ContainerRef> {
    let text = proc_cgroup(proc_root, pid)?;
    cgroup_paths(&text).into_iter().find_map(parse_cgroup_path)
}

/// `/proc/PID/cgroup` (at most 64 KiB), None when the process is gone.
pub fn proc_cgroup(proc_root: &Path, pid: u32) -> Option<String> {
    read_capped(&proc_root.join(pid.to_string()).join("cgroup"), 64 << 10)
}

/// What a container is called: its name, and its pod's namespace and name on Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerName {
    pub container: String,
    /// `namespace/name` of its pod.
    pub pod: Option<String>,
}

/// Asks a runtime's command line for facts about one container, bounded in time: a hung
/// runtime never holds jitterscope up.
pub fn run_runtime(argv: &[&str], timeout: Duration) -> Option<String> {
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    return None;
                }
                let mut out = String::new();
                use std::io::Read;
                child
                    .stdout
                    .take()?
                    .take(1 << 20)
                    .read_to_string(&mut out)
                    .ok()?;
                return Some(out);
            }
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// How long one question to a runtime's CLI may take.
pub const RUNTIME_TIMEOUT: Duration = Duration::from_secs(3);

/// The kubelet's log links, `/var/log/containers/<pod>_<namespace>_<container>-<id>.log`:
/// the container's and its pod's names for an id, with no runtime asked.
fn name_from_kubelet_logs(dir: &Path, id: &str) -> Option<ContainerName> {
    let suffix = format!("-{id}.log");
    for e in std::fs::read_dir(dir).ok()?.flatten().take(100_000) {
        let f = e.file_name();
        let Some(f) = f.to_str() else { continue };
        let Some(head) = f.strip_suffix(&suffix) else {
            continue;
        };
        let mut it = head.splitn(3, '_');
        if let (Some(pod), Some(ns), Some(container)) = (it.next(), it.next(), it.next()) {
            return Some(ContainerName {
                container: container.to_string(),
                pod: Some(format!("{ns}/{pod}")),
            });
        }
    }
    None
}

/// docker's own record of a container, `/var/lib/docker/containers/<id>/config.v2.json`.
fn name_from_docker_config(root: &Path, id: &str) -> Option<ContainerName> {
    let text = read_capped(&root.join(id).join("config.v2.json"), 4 << 20)?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let name = v.get("Name")?.as_str()?.trim_start_matches('/');
    Some(ContainerName {
        container: name.to_string(),
        pod: None,
    })
}

/// A runtime CLI's answer for a container's name (podman/docker `inspect`, `crictl inspect`).
fn name_from_cli(c: &ContainerRef) -> Option<ContainerName> {
    match c.runtime {
        Runtime::Podman | Runtime::Docker => {
            let tool = c.runtime.name();
            let out = run_runtime(
                &[tool, "inspect", "--format", "{{.Name}}", &c.id],
                RUNTIME_TIMEOUT,
            )?;
            let name = out.trim().trim_start_matches('/');
            (!name.is_empty()).then(|| ContainerName {
                container: name.to_string(),
                pod: None,
            })
        }
        Runtime::Containerd | Runtime::Crio => {
            let out = run_runtime(&["crictl", "inspect", &c.id], RUNTIME_TIMEOUT)?;
            let v: serde_json::Value = serde_json::from_str(&out).ok()?;
            let status = v.get("status")?;
            let name = status.pointer("/metadata/name")?.as_str()?;
            let labels = status.get("labels");
            let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(|x| x.as_str());
            let pod = match (
                label("io.kubernetes.pod.namespace"),
                label("io.kubernetes.pod.name"),
            ) {
                (Some(ns), Some(p)) => Some(format!("{ns}/{p}")),
                _ => None,
            };
            Some(ContainerName {
                container: name.to_string(),
                pod,
            })
        }
    }
}

/// Where the name lookups read the host's files (tests point it at a fixture tree).
#[derive(Debug, Clone)]
pub struct NameSources {
    pub kubelet_logs: PathBuf,
    pub docker_containers: PathBuf,
    /// Ask the runtimes' command lines when the files do not say.
    pub ask_runtimes: bool,
}

impl Default for NameSources {
    fn default() -> Self {
        NameSources {
            kubelet_logs: PathBuf::from("/var/log/containers"),
            docker_containers: PathBuf::from("/var/lib/docker/containers"),
            ask_runtimes: true,
        }
    }
}

/// Container names by id, each looked up once (files first, then the runtime's CLI); an id no
/// source names keeps its short id as its name.
#[derive(Debug, Default)]
pub struct Names {
    sources: NameSources,
    known: HashMap<String, ContainerName>,
}

impl Names {
    pub fn new(sources: NameSources) -> Self {
        Names {
            sources,
            known: HashMap::new(),
        }
    }

    pub fn name(&mut self, c: &ContainerRef) -> ContainerName {
        if let Some(n) = self.known.get(&c.id) {
            return n.clone();
        }
        let s = &self.sources;
        let found = name_from_kubelet_logs(&s.kubelet_logs, &c.id)
            .or_else(|| {
                (c.runtime == Runtime::Docker)
                    .then(|| name_from_docker_config(&s.docker_containers, &c.id))
                    .flatten()
            })
            .or_else(|| s.ask_runtimes.then(|| name_from_cli(c)).flatten());
        let mut name = found.unwrap_or_else(|| ContainerName {
            container: c.short_id().to_string(),
            pod: None,
        });
        if name.pod.is_none() {
            if let Some(uid) = &c.pod_uid {
                name.pod = Some(format!("pod {uid}"));
            }
        }
        self.known.insert(c.id.clone(), name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "cad61e2393fd6075d215e1856af27a14104533c3289c6433c26aaa6aab0c13b6";
    const UID: &str = "8f1b2c3d-4e5f-6789-abcd-ef0123456789";

    fn parse(p: &str) -> Option<ContainerRef> {
        let p = p
            .replace("UID_", &UID.replace('-', "_"))
            .replace("UID", UID)
            .replace("ID", ID);
        parse_cgroup_path(&p)
    }

    #[test]
    fn the_runtimes_cgroup_names_give_the_container() {
        let cases: [(&str, Runtime, Option<&str>); 12] = [
            // containerd, systemd driver, a burstable pod (cgroup v2 and v1 show the same path)
            ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podUID_.slice/cri-containerd-ID.scope", Runtime::Containerd, Some("burstable")),
            // containerd, a Guaranteed pod (no QoS level)
            ("/kubepods.slice/kubepods-podUID_.slice/cri-containerd-ID.scope", Runtime::Containerd, Some("guaranteed")),
            // containerd, cgroupfs driver
            ("/kubepods/besteffort/podUID/ID", Runtime::Containerd, Some("besteffort")),
            ("/kubepods/podUID/ID", Runtime::Containerd, Some("guaranteed")),
            // CRI-O, both drivers
            ("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podUID_.slice/crio-ID.scope", Runtime::Crio, Some("besteffort")),
            ("/kubepods/burstable/podUID/crio-ID", Runtime::Crio, Some("burstable")),
            // docker, both drivers
            ("/system.slice/docker-ID.scope", Runtime::Docker, None),
            ("/docker/ID", Runtime::Docker, None),
            // podman: root with systemd, its split `container` sub-cgroup, rootless, cgroupfs
            ("/machine.slice/libpod-ID.scope", Runtime::Podman, None),
            ("/machine.slice/libpod-ID.scope/container", Runtime::Podman, None),
            ("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-ID.scope", Runtime::Podman, None),
            ("/libpod_parent/libpod-ID", Runtime::Podman, None),
        ];
        for (path, runtime, qos) in cases {
            let c = parse(path).unwrap_or_else(|| panic!("{path}: no container"));
            assert_eq!(c.runtime, runtime, "{path}");
            assert_eq!(c.id, ID, "{path}");
            assert_eq!(c.qos, qos, "{path}");
            assert_eq!(c.pod_uid.as_deref(), qos.map(|_| UID), "{path}");
        }
    }

    #[test]
    fn monitors_services_and_short_ids_are_no_container() {
        for path in [
            "/",
            "/user.slice/user-1000.slice/session-3.scope",
            "/system.slice/containerd.service",
            "/system.slice/kubelet.service",
            "/machine.slice/libpod-conmon-ID.scope",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podUID_.slice/crio-conmon-ID.scope",
            "/kubepods.slice/kubepods-podUID_.slice",
            "/system.slice/docker-cad61e2393fd.scope",
            "/ID",
        ] {
            assert_eq!(parse(path), None, "{path}");
        }
    }

    #[test]
    fn proc_cgroup_is_read_v2_first() {
        let text = format!(
            "9:name=systemd:/user.slice\n3:cpuset:/libpod_parent/libpod-{ID}\n0::/libpod_parent/libpod-{ID}\n"
        );
        let paths = cgroup_paths(&text);
        assert_eq!(paths[0], format!("/libpod_parent/libpod-{ID}"));
        assert_eq!(paths.len(), 3);
        let c = paths.into_iter().find_map(parse_cgroup_path).unwrap();
        assert_eq!((c.runtime, c.short_id()), (Runtime::Podman, "cad61e2393fd"));
    }

    #[test]
    fn names_come_from_the_kubelet_log_links_then_the_short_id() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("containers");
        std::fs::create_dir(&logs).unwrap();
        std::fs::write(logs.join(format!("trader-7d9f_prod_engine-{ID}.log")), "").unwrap();
        let mut names = Names::new(NameSources {
            kubelet_logs: logs,
            docker_containers: dir.path().join("docker"),
            ask_runtimes: false,
        });
        let c = parse("/kubepods.slice/kubepods-podUID_.slice/cri-containerd-ID.scope").unwrap();
        let n = names.name(&c);
        assert_eq!(n.container, "engine");
        assert_eq!(n.pod.as_deref(), Some("prod/trader-7d9f"));
        let other = ContainerRef {
            id: ID.replace('c', "d"),
            ..c
        };
        let n = names.name(&other);
        assert_eq!(n.container, &other.id[..12]);
        assert_eq!(n.pod, Some(format!("pod {UID}")));
    }

    #[test]
    fn docker_names_come_from_its_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(ID)).unwrap();
        std::fs::write(
            dir.path().join(ID).join("config.v2.json"),
            r#"{"ID":"x","Name":"/market-feed"}"#,
        )
        .unwrap();
        let mut names = Names::new(NameSources {
            kubelet_logs: dir.path().join("none"),
            docker_containers: dir.path().to_path_buf(),
            ask_runtimes: false,
        });
        let c = parse("/system.slice/docker-ID.scope").unwrap();
        assert_eq!(names.name(&c).container, "market-feed");
    }
}
