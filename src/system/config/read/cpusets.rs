//! cpusets that isolate, cgroup v2 or v1.

use std::path::Path;

use super::{read_list, read_trimmed};
use crate::system::config::{CpusetConfig, Root};

/// The walk's bounds: cgroups nested deeper, or beyond this many, are not visited.
const MAX_DEPTH: usize = 8;
const MAX_CGROUPS: usize = 4096;

/// The systemd units whose cgroups carry `AllowedCPUs=`.
const SLICES: &[&str] = &["/system.slice", "/user.slice", "/init.scope"];

pub(super) fn read(root: &Root) -> Vec<CpusetConfig> {
    if root.path("/sys/fs/cgroup/cgroup.controllers").exists() {
        v2(root)
    } else if root.path("/sys/fs/cgroup/cpuset").is_dir() {
        v1(root)
    } else {
        Vec::new()
    }
}

/// Every cgroup whose partition is not `member`, then the systemd slices.
fn v2(root: &Root) -> Vec<CpusetConfig> {
    let base = "/sys/fs/cgroup";
    let mut sets: Vec<CpusetConfig> = cgroups(&root.path(base))
        .into_iter()
        .filter_map(|rel| {
            let partition = read_trimmed(root, &format!("{base}{rel}/cpuset.cpus.partition"))?;
            (partition != "member").then(|| CpusetConfig {
                cpus: read_list(root, &format!("{base}{rel}/cpuset.cpus.effective"))
                    .unwrap_or_default(),
                path: rel,
                partition: Some(partition),
                exclusive: None,
            })
        })
        .collect();
    for slice in SLICES {
        if sets.iter().any(|s| s.path == *slice) {
            continue;
        }
        if let Some(cpus) = read_list(root, &format!("{base}{slice}/cpuset.cpus.effective")) {
            sets.push(CpusetConfig {
                path: slice.to_string(),
                cpus,
                partition: read_trimmed(root, &format!("{base}{slice}/cpuset.cpus.partition")),
                exclusive: None,
            });
        }
    }
    sets
}

/// The root set, then every set with `cpu_exclusive` on (files named `cpuset.cpus` or, on a
/// hierarchy mounted with `noprefix`, `cpus`).
fn v1(root: &Root) -> Vec<CpusetConfig> {
    let base = "/sys/fs/cgroup/cpuset";
    let file = |rel: &str, name: &str| {
        read_trimmed(root, &format!("{base}{rel}/cpuset.{name}"))
            .or_else(|| read_trimmed(root, &format!("{base}{rel}/{name}")))
    };
    let mut rels = vec![String::new()];
    rels.extend(cgroups(&root.path(base)));
    rels.into_iter()
        .filter_map(|rel| {
            let exclusive = file(&rel, "cpu_exclusive").map(|v| v == "1");
            if !rel.is_empty() && exclusive != Some(true) {
                return None;
            }
            let cpus = file(&rel, "cpus")
                .and_then(|v| super::parse_cpulist(&v, None))
                .unwrap_or_default();
            Some(CpusetConfig {
                path: if rel.is_empty() { "/".to_string() } else { rel },
                cpus,
                partition: None,
                exclusive,
            })
        })
        .collect()
}

/// The cgroups below `base` (not `base` itself), as paths from it (`/a/b`), breadth first
/// within the bounds.
fn cgroups(base: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut level = vec![String::new()];
    'walk: for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for rel in &level {
            let Ok(dir) = std::fs::read_dir(base.join(rel.trim_start_matches('/'))) else {
                continue;
            };
            for entry in dir.flatten() {
                if found.len() >= MAX_CGROUPS {
                    break 'walk;
                }
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let child = format!("{rel}/{}", entry.file_name().to_string_lossy());
                    found.push(child.clone());
                    next.push(child);
                }
            }
        }
        level = next;
    }
    found.sort();
    found
}
