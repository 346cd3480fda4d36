//! The containers task culprits ran in, found while the tasks are alive: when the session
//! first takes in a record of a task's pid, its `/proc/PID/cgroup` is read once (cached), and
//! each container's name is looked up once (`system::container`). Every later record of that
//! pid costs one map look-up. The container is typed data on the culprit (`model::Who::Task`)
//! from then on; its words are made where it is shown.
//!
//! The session's threads run off the measured CPUs, and so do these reads. A pid the session
//! cannot read in its `/proc` has no container: a task gone before its first record was taken
//! in, or any task when jitterscope runs in a PID namespace of its own (the records number
//! tasks as the kernel's first namespace does, its `/proc` as its own).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::model::{Container, ContainerTag, CulpritClass, Interruption, Who, ANY_PID};
use crate::system::container::{container_of_pid, ContainerRef, NameSources, Names};

/// Pids whose container (or none) is remembered; past it the memory starts afresh (a fork
/// storm's pids each read once more at most, never a growing map).
pub(super) const PIDS_KEPT: usize = 32_768;
/// Containers named; a task of a container past these has no label (the metrics' bound is
/// per CPU and class anyway: `report::metrics::CULPRIT_SERIES`).
pub(super) const CONTAINERS_KEPT: usize = 1_024;

/// The containers of task culprits, by pid and by container id.
pub(super) struct ContainerTags {
    /// Where pids are read; None: the records' pids are not this `/proc`'s.
    proc_root: Option<PathBuf>,
    by_pid: HashMap<u32, Option<Container>>,
    by_id: HashMap<String, Container>,
    names: Names,
}

impl ContainerTags {
    /// Tags read from `proc_root`, when the probes number pids as it does (`same_pids`: the
    /// probes' pid of jitterscope is its `getpid()`).
    pub(super) fn new(proc_root: PathBuf, same_pids: bool) -> Self {
        Self::with_names(
            same_pids.then_some(proc_root),
            Names::new(NameSources::default()),
        )
    }

    fn with_names(proc_root: Option<PathBuf>, names: Names) -> Self {
        ContainerTags {
            proc_root,
            by_pid: HashMap::new(),
            by_id: HashMap::new(),
            names,
        }
    }

    /// No container is looked up (no probes, or none wanted).
    pub(super) fn off() -> Self {
        Self::with_names(None, Names::default())
    }

    /// Gives a task culprit's record its container, if its pid runs in one.
    pub(super) fn tag(&mut self, i: &mut Interruption) {
        if i.class != CulpritClass::Task || self.proc_root.is_none() {
            return;
        }
        if let Who::Task {
            pid,
            container: c @ None,
            ..
        } = &mut i.who
        {
            if *pid != 0 && *pid != ANY_PID {
                *c = self.of_pid(*pid);
            }
        }
    }

    fn of_pid(&mut self, pid: u32) -> Option<Container> {
        if let Some(known) = self.by_pid.get(&pid) {
            return known.clone();
        }
        let root = self.proc_root.as_ref()?;
        let found = container_of_pid(root, pid).and_then(|r| self.container(&r));
        if self.by_pid.len() >= PIDS_KEPT {
            self.by_pid.clear();
        }
        self.by_pid.insert(pid, found.clone());
        found
    }

    /// The one shared tag of a container, named once.
    fn container(&mut self, r: &ContainerRef) -> Option<Container> {
        if let Some(c) = self.by_id.get(&r.id) {
            return Some(c.clone());
        }
        if self.by_id.len() >= CONTAINERS_KEPT {
            return None;
        }
        let c = Arc::new(tag_of(r, &mut self.names));
        self.by_id.insert(r.id.clone(), c.clone());
        Some(c)
    }
}

/// A container's tag: its name (and pod's) as the runtime or the kubelet gives them.
fn tag_of(r: &ContainerRef, names: &mut Names) -> ContainerTag {
    let n = names.name(r);
    ContainerTag {
        name: n.container,
        runtime: r.runtime.name().to_string(),
        short_id: r.short_id().to_string(),
        // `Names` says `pod <uid>` for a pod no source named: the pod is then its UID.
        pod: n
            .pod
            .map(|p| p.strip_prefix("pod ").map(str::to_string).unwrap_or(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Who;

    const ID: &str = "3f2a9c1b7d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    /// A `/proc` with pid 10 in a podman container, pid 11 in a Kubernetes pod's container
    /// and pid 12 in none.
    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let cg = |pid: u32, text: String| {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("cgroup"), text).unwrap();
        };
        cg(
            10,
            format!("0::/machine.slice/libpod-{ID}.scope/container\n"),
        );
        let pod = "kubepods-burstable-pod1c2d3e4f_0000_4aaa_8bbb_123456789abc.slice";
        let kube = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/{pod}/cri-containerd-{}.scope\n",
            ID.replace('3', "4")
        );
        cg(11, kube);
        cg(
            12,
            "0::/user.slice/user-1000.slice/session-3.scope\n".to_string(),
        );
        // The kubelet's log link names the pod's container.
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let link = format!("trader-7d9f_prod_engine-{}.log", ID.replace('3', "4"));
        std::fs::write(logs.join(link), "").unwrap();
        dir
    }

    fn tags(dir: &tempfile::TempDir) -> ContainerTags {
        let names = Names::new(NameSources {
            kubelet_logs: dir.path().join("logs"),
            docker_containers: dir.path().join("none"),
            ask_runtimes: false,
        });
        ContainerTags::with_names(Some(dir.path().to_path_buf()), names)
    }

    fn task(class: CulpritClass, pid: u32) -> Interruption {
        Interruption {
            cpu: 1,
            class,
            start_ns: 0,
            end_ns: 1,
            id: u64::from(pid),
            who: Who::Task {
                comm: "sh".into(),
                pid,
                policy: 0,
                container: None,
            },
            pid,
            parent: None,
            victim: 0,
        }
    }

    fn container_of(i: &Interruption) -> Option<Container> {
        match &i.who {
            Who::Task { container, .. } => container.clone(),
            _ => None,
        }
    }

    #[test]
    fn task_culprits_get_their_container_and_pod_and_others_none() {
        let dir = fixture();
        let mut t = tags(&dir);
        let mut podman = task(CulpritClass::Task, 10);
        t.tag(&mut podman);
        let c = container_of(&podman).expect("pid 10 is in a podman container");
        // No source names it here: its short id is its name.
        assert_eq!(c.name, &ID[..12]);
        assert_eq!(
            (c.runtime.as_str(), c.short_id.as_str()),
            ("podman", &ID[..12])
        );
        assert_eq!(c.pod, None);
        let mut kube = task(CulpritClass::Task, 11);
        t.tag(&mut kube);
        let k = container_of(&kube).expect("pid 11 is in a pod's container");
        assert_eq!(k.name, "engine");
        assert_eq!(k.pod.as_deref(), Some("prod/trader-7d9f"));
        assert_eq!(k.runtime, "containerd");
        for (class, pid) in [
            (CulpritClass::Task, 12),
            (CulpritClass::Task, 99),
            (CulpritClass::SelfNoise, 10),
        ] {
            let mut i = task(class, pid);
            t.tag(&mut i);
            assert_eq!(container_of(&i), None, "{class:?} pid {pid}");
        }
    }

    #[test]
    fn a_pid_is_read_once_and_its_container_shared() {
        let dir = fixture();
        let mut t = tags(&dir);
        let mut first = task(CulpritClass::Task, 10);
        t.tag(&mut first);
        // Gone from /proc now: the pid's container was found while it was alive.
        std::fs::remove_dir_all(dir.path().join("10")).unwrap();
        let mut again = task(CulpritClass::Task, 10);
        t.tag(&mut again);
        let (a, b) = (container_of(&first).unwrap(), container_of(&again).unwrap());
        assert!(Arc::ptr_eq(&a, &b), "one tag per container");
        assert_eq!(first.who, again.who, "one culprit");
    }

    #[test]
    fn pids_of_another_namespace_are_never_read() {
        let dir = fixture();
        let mut t = ContainerTags::new(dir.path().to_path_buf(), false);
        let mut i = task(CulpritClass::Task, 10);
        t.tag(&mut i);
        assert_eq!(container_of(&i), None);
    }

    #[test]
    fn the_pid_memory_is_bounded() {
        let dir = fixture();
        let mut t = tags(&dir);
        for pid in 1000..1000 + PIDS_KEPT as u32 + 10 {
            let mut i = task(CulpritClass::Task, pid);
            t.tag(&mut i);
        }
        assert!(t.by_pid.len() <= PIDS_KEPT);
    }
}
