//! `deploy/`: the DaemonSet manifest and the Containerfile, read as Kubernetes and a builder
//! would read them (the image is not built here: there is no image registry), and the
//! DaemonSet's container run for real by podman with the manifest's own security context.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use jitterscope::cli::{Cli, Command as Sub};
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn daemonset() -> Value {
    let text = std::fs::read_to_string(repo("deploy/daemonset.yaml")).unwrap();
    serde_yaml::from_str(&text).expect("deploy/daemonset.yaml is not valid YAML")
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("not a string: {s}")))
        .collect()
}

/// The metrics file the manifest's arguments name.
fn metrics_arg(args: &[&str]) -> String {
    let i = args
        .iter()
        .position(|a| *a == "--metrics")
        .expect("--metrics");
    args[i + 1].to_string()
}

const TEXTFILE: &str = "/var/lib/node_exporter/textfile_collector";

#[test]
fn the_daemonset_runs_a_valid_jitterscope_command_with_least_privilege() {
    let d = daemonset();
    assert_eq!(d["apiVersion"], "apps/v1");
    assert_eq!(d["kind"], "DaemonSet");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(
        d["spec"]["selector"]["matchLabels"],
        d["spec"]["template"]["metadata"]["labels"]
    );
    assert_eq!(pod["hostPID"], true);
    assert_ne!(pod["hostNetwork"], true);
    assert!(pod["nodeSelector"].is_object() && pod["tolerations"].is_array());
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    // The image is the one deploy/Containerfile builds, tagged with this version.
    assert_eq!(
        c["image"],
        format!("jitterscope:{}", env!("CARGO_PKG_VERSION")).as_str()
    );
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(
        strings(&sc["capabilities"]["add"]),
        ["BPF", "PERFMON", "SYSLOG"]
    );
    // Requests equal limits.
    assert!(c["resources"]["limits"].is_object());
    assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
    // The arguments are a jitterscope command line that writes metrics for a whole node.
    let args = strings(&c["args"]);
    let cli = Cli::try_parse_from(std::iter::once("jitterscope").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} is not a jitterscope command line: {e}"));
    let Some(Sub::Probe(probe)) = cli.command else {
        panic!("{args:?}: not `probe`");
    };
    assert!(probe.no_log, "a pod's log would hold every interruption");
    let metrics = probe.metrics.expect("--metrics");
    assert_eq!(metrics.parent(), Some(Path::new(TEXTFILE)));
    assert_eq!(metrics.extension().and_then(|e| e.to_str()), Some("prom"));
    // Mounts: the textfile directory from the host, the BTF read-only, and nothing else.
    let volumes = pod["volumes"].as_array().unwrap();
    let host_path = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))["hostPath"]["path"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert_eq!(mounts.len(), volumes.len());
    let mount = |path: &str| {
        mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    let textfile = mount(TEXTFILE);
    assert_eq!(host_path(textfile["name"].as_str().unwrap()), TEXTFILE);
    assert_ne!(textfile["readOnly"], true);
    let btf = mount("/sys/kernel/btf");
    assert_eq!(btf["readOnly"], true);
    assert_eq!(host_path(btf["name"].as_str().unwrap()), "/sys/kernel/btf");
}

/// The packages named in the first `packages=(…)` line of scripts/deps.sh: a build's.
fn build_packages() -> Vec<String> {
    let deps = std::fs::read_to_string(repo("scripts/deps.sh")).unwrap();
    let line = deps
        .lines()
        .find(|l| l.starts_with("packages=("))
        .expect("packages=( in scripts/deps.sh");
    line.trim_start_matches("packages=(")
        .trim_end_matches(')')
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// The Containerfile's stages: (the FROM line, the lines after it) with continuation lines
/// joined.
fn stages() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(repo("deploy/Containerfile")).unwrap();
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("FROM ") {
            stages.push((line.to_string(), Vec::new()));
        } else {
            stages
                .last_mut()
                .expect("FROM first")
                .1
                .push(line.to_string());
        }
    }
    stages
}

#[test]
fn the_containerfile_builds_as_the_scripts_do_and_ships_only_the_binary() {
    let stages = stages();
    assert_eq!(stages.len(), 2, "{stages:#?}");
    let (from, build) = &stages[0];
    assert!(from.ends_with(" AS build"), "{from}");
    let install = build
        .iter()
        .find(|l| l.contains("apt-get install"))
        .expect("the build stage installs its packages");
    for p in build_packages() {
        assert!(
            install.split_whitespace().any(|w| w == p),
            "the build stage lacks {p}, which scripts/deps.sh installs for a build: {install}"
        );
    }
    assert!(
        build
            .iter()
            .any(|l| l.starts_with("RUN ") && l.contains("cargo build --release")),
        "{build:?}"
    );
    // Everything the build reads is copied, and exists.
    let copied: Vec<&str> = build
        .iter()
        .filter_map(|l| l.strip_prefix("COPY "))
        .flat_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w[..w.len() - 1].to_vec()
        })
        .collect();
    for needed in ["Cargo.toml", "Cargo.lock", "bpf", "vmlinux", "src"] {
        assert!(
            copied.contains(&needed),
            "{needed} is not copied: {copied:?}"
        );
    }
    for c in &copied {
        assert!(repo(c).exists(), "{c} is copied but not in the repository");
    }
    let (from, runtime) = &stages[1];
    assert!(from.contains("-slim"), "{from}");
    let copy: Vec<&String> = runtime.iter().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(
        copy,
        ["COPY --from=build /src/target/release/jitterscope /usr/local/bin/jitterscope"]
    );
    assert!(runtime
        .iter()
        .any(|l| l.starts_with("ENTRYPOINT") && l.contains("/usr/local/bin/jitterscope")));
    // The runtime packages are exactly those that hold the libraries the binary links beyond
    // the C runtime every Debian image has.
    let install = runtime
        .iter()
        .find(|l| l.contains("apt-get install"))
        .expect("the runtime stage installs its libraries");
    let mut named: Vec<&str> = install
        .split_whitespace()
        .skip_while(|w| *w != "--no-install-recommends")
        .skip(1)
        .take_while(|w| *w != "&&")
        .collect();
    named.sort_unstable();
    let mut needed = linked_packages(Path::new(env!("CARGO_BIN_EXE_jitterscope")));
    needed.retain(|p| !["libc6", "libgcc-s1"].contains(&p.as_str()));
    assert_eq!(named, needed, "{install}");
}

/// The Debian packages holding the shared libraries `bin` links (by ldd and dpkg).
fn linked_packages(bin: &Path) -> Vec<String> {
    let out = Command::new("ldd").arg(bin).output().expect("ldd");
    let ldd = String::from_utf8_lossy(&out.stdout);
    let mut pkgs: Vec<String> = Vec::new();
    for lib in ldd.lines().filter_map(|l| l.split("=> ").nth(1)) {
        let path = lib.split_whitespace().next().unwrap();
        let real = std::fs::canonicalize(path).unwrap();
        let name = real.file_name().unwrap().to_string_lossy().to_string();
        let out = Command::new("dpkg")
            .args(["-S", &format!("*/{name}")])
            .output()
            .expect("dpkg");
        let owner = String::from_utf8_lossy(&out.stdout);
        let pkg = owner
            .lines()
            .find(|l| l.ends_with(&format!("/{name}")))
            .and_then(|l| l.split(':').next())
            .unwrap_or_else(|| panic!("no package holds {name}"))
            .to_string();
        pkgs.push(pkg);
    }
    pkgs.sort_unstable();
    pkgs.dedup();
    pkgs
}

/// The DaemonSet's container as podman runs it with the manifest's security context — its
/// capabilities and nothing else, a read-only root, the host's PID namespace, its seccomp
/// setting, the BTF and textfile mounts — from a root file system holding only the binary and
/// the libraries it links (the runtime stage's content): the metrics file is written, and
/// work functions are named, not shown as addresses.
#[test]
fn the_daemonsets_container_writes_metrics_with_exactly_its_capabilities() {
    if common::skip_bpf("the_daemonsets_container_writes_metrics_with_exactly_its_capabilities") {
        return;
    }
    let _cpus = common::exclusive();
    let d = daemonset();
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    let sc = &c["securityContext"];
    let podman = common::containers::Podman::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rootfs");
    let bin = Path::new(env!("CARGO_BIN_EXE_jitterscope"));
    for d in [
        "usr/local/bin",
        "proc",
        "sys",
        "dev",
        "etc",
        "tmp",
        TEXTFILE.trim_start_matches('/'),
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(bin, root.join("usr/local/bin/jitterscope")).unwrap();
    let ldd = Command::new("ldd").arg(bin).output().unwrap();
    for l in String::from_utf8_lossy(&ldd.stdout).lines() {
        let Some(path) = l.split_whitespace().find(|w| w.starts_with('/')) else {
            continue;
        };
        let to = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(path, to).unwrap();
    }
    let textfile = dir.path().join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    // The manifest's arguments, on this machine's CPU 1 and for seconds instead of a week.
    let mut args: Vec<String> = strings(&c["args"]).iter().map(|s| s.to_string()).collect();
    for (flag, value) in [
        ("--cpus", "1"),
        ("--duration", "3s"),
        ("--metrics-interval", "1s"),
    ] {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = value.to_string();
    }
    let metrics = metrics_arg(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut cmd = podman.command();
    cmd.args(["run", "--rm", "--pid", "host", "--cap-drop", "ALL"]);
    cmd.arg("--cap-add")
        .arg(strings(&sc["capabilities"]["add"]).join(","));
    assert_eq!(sc["seccompProfile"]["type"], "Unconfined");
    cmd.args(["--security-opt", "seccomp=unconfined"]);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    cmd.args(["--security-opt", "no-new-privileges", "--read-only"]);
    cmd.arg("--user")
        .arg(sc["runAsUser"].as_u64().unwrap().to_string());
    let memory = c["resources"]["limits"]["memory"].as_str().unwrap();
    cmd.arg("--memory")
        .arg(memory.trim_end_matches("Mi").to_string() + "m");
    cmd.args(["-v", "/sys/kernel/btf:/sys/kernel/btf:ro", "-v"]);
    cmd.arg(format!("{}:{TEXTFILE}", textfile.display()));
    cmd.arg("--rootfs")
        .arg(&root)
        .arg("/usr/local/bin/jitterscope")
        .args(&args);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let name = Path::new(&metrics).file_name().unwrap();
    let text = std::fs::read_to_string(textfile.join(name)).unwrap();
    assert!(text.contains("jitterscope_info{"), "{text}");
    let culprits: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("jitterscope_stolen_seconds_total{"))
        .filter_map(|l| l.split("culprit=\"").nth(1)?.split('"').next())
        .collect();
    assert!(!culprits.is_empty(), "{text}");
    assert!(
        culprits.iter().all(|c| !c.starts_with("0xffff")),
        "culprits shown as addresses (kallsyms hidden): {culprits:?}"
    );
}
