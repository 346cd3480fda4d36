//! `check` on a Kubernetes node, with the kubelet's CPU manager checkpoint a fixture: CPU 1
//! is a pod's container's own, and a real podman container and a process of the host spin
//! there. The report names the pod's broken promise and who broke it.

mod common;

use std::process::Command;

use common::containers::Podman;
use common::{exclusive, skip_bpf, Competitor};
use serde_json::Value;

const UID: &str = "8f1b2c3d-4e5f-6789-abcd-ef0123456789";

#[test]
fn a_pods_exclusive_cpu_broken_by_a_container_and_a_host_process_is_named() {
    if skip_bpf("a_pods_exclusive_cpu_broken_by_a_container_and_a_host_process_is_named") {
        return;
    }
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cpu_manager_state");
    std::fs::write(
        &state,
        format!(
            r#"{{"policyName":"static","defaultCpuSet":"0","entries":{{"{UID}":{{"engine":"1"}}}},"checksum":1234}}"#
        ),
    )
    .unwrap();
    let podman = Podman::new().unwrap();
    let intruder = podman
        .start("js-test-kube-intruder", "1", "while :; do :; done")
        .unwrap();
    let container_pid = intruder.pid().unwrap();
    let host = Competitor::start(1);
    let json = dir.path().join("check.json");
    // No --cpus: the checkpoint's exclusive CPUs are the ones checked.
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["check", "--duration", "3s", "--kubelet-state"])
        .arg(&state)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}");
    assert_eq!(out.status.code(), Some(1), "{text}\n{stderr}");
    assert!(
        stderr.contains(&format!("pod {UID} container engine's exclusive CPU 1")),
        "{stderr}"
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["cpus"], serde_json::json!([1]), "{r}");
    assert_eq!(r["exit_code"], 1);
    let k = &r["kubernetes"];
    assert_eq!(k["policy"], "static");
    assert_eq!(k["owners"][0]["pod_uid"], UID);
    assert_eq!(k["owners"][0]["container"], "engine");
    let breaches = k["breaches"].as_array().unwrap();
    let by_pid = |pid: u32| {
        breaches
            .iter()
            .find(|b| b["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} is not named: {k}"))
    };
    // Each spinner shares CPU 1 with the check's own: well over a tenth of the 3 s each.
    let c = by_pid(container_pid);
    assert_eq!(c["by"], "container", "{c}");
    assert_eq!(c["cpu"], 1);
    assert_eq!(c["container"], "engine");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains("podman container js-test-kube-intruder"),
        "{c}"
    );
    assert!(c["time_ns"].as_u64().unwrap() > 300_000_000, "{c}");
    let h = by_pid(host.pid());
    assert_eq!(h["by"], "process", "{h}");
    assert!(h["detail"].as_str().unwrap().starts_with("cgroup /"), "{h}");
    assert!(h["time_ns"].as_u64().unwrap() > 300_000_000, "{h}");
    assert!(
        text.contains(&format!(
            "CPU 1: exclusive to pod {UID} container engine — BROKEN by"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("sh[{container_pid}] — a container outside Kubernetes (podman container js-test-kube-intruder)")),
        "{text}"
    );
}

/// A checkpoint with the `none` policy gives no CPUs to check: said, exit 2; a malformed one
/// given is refused with why.
#[test]
fn a_checkpoint_without_exclusive_cpus_or_malformed_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("none");
    std::fs::write(
        &none,
        r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
    )
    .unwrap();
    let none = none.to_str().unwrap();
    common::usage_error(
        &["check", "--kubelet-state", none],
        "policy none: no container has CPUs of its own",
    );
    if !std::path::Path::new("/var/lib/kubelet/cpu_manager_state").exists() {
        common::usage_error(&["check"], "no kubelet CPU manager checkpoint");
    }
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "{\"policyName\":").unwrap();
    common::usage_error(
        &[
            "check",
            "--kubelet-state",
            bad.to_str().unwrap(),
            "--cpus",
            "1",
        ],
        "not the kubelet's CPU manager checkpoint",
    );
}
