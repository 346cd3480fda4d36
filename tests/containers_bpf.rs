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
