//! A cgroup as a watch target: the cgroup v2 mount (from `/proc/self/mountinfo`: fstype
//! `cgroup2`, at `/sys/fs/cgroup` on a pure v2 machine, `/sys/fs/cgroup/unified` in hybrid
//! mode), a path as `/proc/PID/cgroup` shows it (or an absolute path under that mount) to its
//! directory, its id (the directory's inode number: the kernfs id the kernel's
//! `cgroup->kn->id` and `bpf_get_current_cgroup_id()` give) and its level (its depth below the
//! root), and the threads in it and its descendants. A container by name or id is found
//! through the runtime that owns it, or by the cgroup naming conventions of
//! `system::container`.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::container::{self, parse_cgroup_path, run_runtime, RUNTIME_TIMEOUT};

/// How deep below a watched cgroup its threads are looked for, and how many cgroups at most.
const WALK_DEPTH: usize = 16;
const WALK_CGROUPS: usize = 4096;
/// How deep and how wide the v2 hierarchy is scanned for a container's cgroup by its id
/// (Kubernetes puts containers 3 to 5 levels down).
const SCAN_DEPTH: usize = 8;
const SCAN_CGROUPS: usize = 20_000;
/// The shortest id prefix taken for a container (as `podman ps` and `docker ps` show ids).
pub const MIN_ID_PREFIX: usize = 12;

/// A cgroup v2 directory to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// Its path as `/proc/PID/cgroup` shows it (`/` for the root).
    pub path: String,
    /// Its directory under the v2 mount.
    pub dir: PathBuf,
    /// Its kernfs id (the directory's inode number).
    pub id: u64,
    /// Its depth below the root (the root is 0).
    pub level: u32,
}

/// The mount point of the cgroup v2 hierarchy in mountinfo's text, if one is mounted.
pub fn v2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (head, tail) = line.split_once(" - ")?;
        if tail.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        head.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// This machine's cgroup v2 mount, or what to say when there is none.
pub fn live_v2_mount() -> Result<PathBuf, String> {
    let text = crate::platform::input::read_proc(
        "/proc/self/mountinfo",
        crate::platform::input::PROC_TABLE,
    )
    .ok_or("cannot read /proc/self/mountinfo")?;
    v2_mount(&text).ok_or_else(|| {
        "no cgroup v2 hierarchy is mounted (the kernel filter needs a v2 cgroup id; mount one: \
         `mount -t cgroup2 none /sys/fs/cgroup/unified`, or boot with systemd.unified_cgroup_hierarchy=1)"
            .to_string()
    })
}

/// `asked` (a cgroup path as `/proc/PID/cgroup` shows it, or an absolute path under `mount`)
/// as a cgroup under the v2 hierarchy mounted at `mount`: its path, directory, id and level.
pub fn resolve(mount: &Path, asked: &str) -> Result<Cgroup, String> {
    let given = Path::new(asked);
    if !given.is_absolute() {
        return Err(format!(
            "not an absolute path (give it as /proc/PID/cgroup shows it, e.g. /libpod_parent/libpod-<id>, or under {})",
            mount.display()
        ));
    }
    if given.components().any(|c| c == Component::ParentDir) {
        return Err("a path with `..` in it is not taken".into());
    }
    let other_hierarchy = Path::new("/sys/fs/cgroup");
    if !given.starts_with(mount) && given.starts_with(other_hierarchy) && mount != other_hierarchy {
        return Err(format!(
            "not in the cgroup v2 hierarchy, which is mounted at {} (give the path as /proc/PID/cgroup's 0:: line shows it)",
            mount.display()
        ));
    }
    let rel = given.strip_prefix(mount).unwrap_or_else(|_| {
        given
            .strip_prefix("/")
            .expect("an absolute path starts at the root")
    });
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let dir = parts.iter().fold(mount.to_path_buf(), |d, p| d.join(p));
    let meta = std::fs::metadata(&dir).map_err(|e| {
        format!(
            "no such cgroup: {} ({e}; list the v2 cgroups with `ls {}`, a process's with `cat /proc/PID/cgroup`, the 0:: line)",
            dir.display(),
            mount.display()
        )
    })?;
    if !meta.is_dir() || !dir.join("cgroup.threads").exists() {
        return Err(format!(
            "{} is not a cgroup v2 directory (it has no cgroup.threads)",
            dir.display()
        ));
    }
    Ok(Cgroup {
        path: format!("/{}", parts.join("/")),
        dir,
        id: meta.ino(),
        level: parts.len() as u32,
    })
}

/// The thread ids (as this PID namespace numbers them) in `dir` and its descendants, from each
/// cgroup's `cgroup.threads`, at most WALK_DEPTH levels down and WALK_CGROUPS cgroups.
pub fn threads(dir: &Path) -> Vec<u32> {
    let mut tids = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0;
    while let Some((d, depth)) = todo.pop() {
        seen += 1;
        if seen > WALK_CGROUPS {
            break;
        }
        if let Some(text) = crate::platform::input::read_proc(
            d.join("cgroup.threads"),
            crate::platform::input::PROC_TABLE,
        ) {
            tids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if depth < WALK_DEPTH {
            todo.extend(subdirs(&d).into_iter().map(|s| (s, depth + 1)));
        }
    }
    tids.retain(|&t| t != 0);
    tids.sort_unstable();
    tids.dedup();
    tids
}

fn subdirs(d: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// A container found for `--container`: what it is called, its runtime and full id, and its
/// cgroup path as `/proc/PID/cgroup` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundContainer {
    pub name: String,
    pub runtime: String,
    pub id: String,
    pub cgroup_path: String,
}

/// Where `find_container` looks (tests point it at fixtures).
#[derive(Debug, Clone)]
pub struct Finder {
    pub v2_mount: PathBuf,
    pub proc_root: PathBuf,
    pub kubelet_logs: PathBuf,
    /// Ask podman, docker and crictl (those on PATH).
    pub ask_runtimes: bool,
}

impl Finder {
    pub fn live(v2_mount: PathBuf) -> Finder {
        Finder {
            v2_mount,
            proc_root: PathBuf::from("/proc"),
            kubelet_logs: PathBuf::from("/var/log/containers"),
            ask_runtimes: true,
        }
    }
}

/// The container called `asked` (a name, or an id or id prefix of at least MIN_ID_PREFIX hex
/// digits): first through the runtimes' CLIs, then by the cgroup naming conventions, then
/// through the kubelet's log links. Not found or ambiguous: what was tried, in one line.
pub fn find_container(f: &Finder, asked: &str) -> Result<FoundContainer, String> {
    let mut tried = Vec::new();
    if f.ask_runtimes {
        for runtime in ["podman", "docker", "crictl"] {
            match ask_runtime(f, runtime, asked) {
                Ok(found) => return Ok(found),
                Err(why) => tried.push(format!("{runtime}: {why}")),
            }
        }
    }
    let hex = asked.len() >= MIN_ID_PREFIX && asked.bytes().all(|b| b.is_ascii_hexdigit());
    if hex {
        match by_id_prefix(&f.v2_mount, &asked.to_ascii_lowercase(), asked) {
            Ok(found) => return Ok(found),
            Err(why) => tried.push(why),
        }
    } else {
        tried.push(format!(
            "not an id to look for in cgroup names (at least {MIN_ID_PREFIX} hex digits)"
        ));
    }
    match kubelet_log_id(&f.kubelet_logs, asked) {
        Ok(id) => by_id_prefix(&f.v2_mount, &id, asked),
        Err(why) => {
            tried.push(why);
            Err(format!("no such container ({})", tried.join("; ")))
        }
    }
}

/// Asks one runtime's CLI (bounded in time) for the container's id, first pid and name, then
/// reads that pid's v2 cgroup path.
fn ask_runtime(f: &Finder, runtime: &str, asked: &str) -> Result<FoundContainer, String> {
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(runtime).is_file()));
    if !on_path {
        return Err("not installed".into());
    }
    let argv: Vec<&str> = match runtime {
        "crictl" => vec!["crictl", "inspect", asked],
        _ => vec![runtime, "inspect", "--type", "container", asked],
    };
    let text = run_runtime(&argv, RUNTIME_TIMEOUT).ok_or("no such container")?;
    let (id, pid, name) = inspect_fields(&text).ok_or("no such container")?;
    let proc_cgroup = f.proc_root.join(pid.to_string()).join("cgroup");
    let cgroups =
        crate::platform::input::read_proc_or_error(&proc_cgroup, crate::platform::input::PROC_FILE)
            .map_err(|e| format!("its process {pid} is gone ({e})"))?;
    let v2 = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| format!("its process {pid} has no cgroup v2 path"))?;
    Ok(FoundContainer {
        name,
        runtime: runtime.to_string(),
        id,
        cgroup_path: v2.trim_end().to_string(),
    })
}

/// Id, first pid and name from `podman|docker inspect` (an array of objects: `Id`,
/// `State.Pid`, `Name`, docker's with a leading `/`) or `crictl inspect` (`status.id`,
/// `info.pid`, `status.metadata.name`); None when the container is not running.
pub fn inspect_fields(text: &str) -> Option<(String, u32, String)> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let (id, pid, name) = match v.as_array() {
        Some(all) => {
            let c = all.first()?;
            (&c["Id"], &c["State"]["Pid"], &c["Name"])
        }
        None => (
            &v["status"]["id"],
            &v["info"]["pid"],
            &v["status"]["metadata"]["name"],
        ),
    };
    let pid = pid.as_u64().filter(|&p| p > 0)? as u32;
    let name = name.as_str()?.trim_start_matches('/').to_string();
    Some((id.as_str()?.to_string(), pid, name))
}

/// The container cgroup whose id starts with `prefix`, scanning the v2 hierarchy (at most
/// SCAN_DEPTH levels and SCAN_CGROUPS cgroups; a container's own sub-cgroups are not entered).
pub fn by_id_prefix(mount: &Path, prefix: &str, asked: &str) -> Result<FoundContainer, String> {
    let mut found: Vec<(container::ContainerRef, String)> = Vec::new();
    let mut todo = vec![(mount.to_path_buf(), 0usize)];
    let mut seen = 0;
    while let Some((d, depth)) = todo.pop() {
        seen += 1;
        if seen > SCAN_CGROUPS {
            break;
        }
        let rel = format!("/{}", d.strip_prefix(mount).unwrap_or(&d).display());
        let last = rel.rsplit('/').next().unwrap_or("");
        if let Some(c) = parse_cgroup_path(last).or_else(|| {
            parse_cgroup_path(&rel).filter(|c| last == c.id && !rel.contains("-conmon-"))
        }) {
            if c.id.starts_with(prefix) && !found.iter().any(|(f, _)| f.id == c.id) {
                found.push((c, rel));
            }
            continue;
        }
        if depth < SCAN_DEPTH {
            todo.extend(subdirs(&d).into_iter().map(|s| (s, depth + 1)));
        }
    }
    match found.len() {
        0 => Err(format!(
            "no cgroup under {} is named for a container id starting with {asked}",
            mount.display()
        )),
        1 => {
            let (c, rel) = found.remove(0);
            Ok(FoundContainer {
                name: c.short_id().to_string(),
                runtime: c.runtime.name().to_string(),
                id: c.id,
                cgroup_path: rel,
            })
        }
        n => Err(format!(
            "{asked} is ambiguous: {n} containers' ids start with it ({}); give more digits",
            found
                .iter()
                .map(|(c, _)| c.short_id().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The id of the container named `name` in the kubelet's log links
/// (`<pod>_<namespace>_<name>-<id>.log`); two pods' containers of that name are ambiguous.
fn kubelet_log_id(dir: &Path, name: &str) -> Result<String, String> {
    let mut ids: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let stem = file.strip_suffix(".log")?;
            let (_, tail) = stem.rsplit_once('_')?;
            let (n, id) = tail.rsplit_once('-')?;
            (n == name && id.len() == 64).then(|| id.to_string())
        })
        .collect();
    ids.sort();
    ids.dedup();
    match ids.len() {
        1 => Ok(ids.remove(0)),
        0 => Err(format!(
            "no kubelet log link {}/*_*_{name}-<id>.log",
            dir.display()
        )),
        n => Err(format!(
            "{n} containers are named {name} in {} (give the id)",
            dir.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const PURE: &str = "\
24 1 0:22 / /proc rw,nosuid - proc proc rw
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let id = "1a2b3c4d5e6f".to_string() + &"0".repeat(52);
        let dirs: Vec<(String, &str)> = vec![
            (String::new(), "1\n2\n"),
            ("libpod_parent".into(), ""),
            (format!("libpod_parent/libpod-{id}"), "40\n41\n"),
            (format!("libpod_parent/libpod-{id}/sub"), "42\n"),
            (format!("libpod_parent/libpod-conmon-{id}"), "39\n"),
        ];
        for (dir, threads) in dirs {
            let p = d.path().join(dir);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("cgroup.threads"), threads).unwrap();
        }
        d
    }

    #[test]
    fn the_v2_mount_is_found_in_hybrid_and_pure_layouts_and_none_in_v1_only() {
        assert_eq!(
            v2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(v2_mount(PURE), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(
            v2_mount(&HYBRID.replace("cgroup2 cgroup2", "cgroup cgroup")),
            None
        );
    }

    #[test]
    fn a_cgroup_path_or_an_absolute_path_resolves_to_its_directory_id_and_level() {
        let d = tree();
        let m = d.path();
        let id = "1a2b3c4d5e6f".to_string() + &"0".repeat(52);
        let by_cgroup = resolve(m, &format!("/libpod_parent/libpod-{id}")).unwrap();
        assert_eq!(by_cgroup.level, 2);
        assert_eq!(by_cgroup.path, format!("/libpod_parent/libpod-{id}"));
        assert_eq!(by_cgroup.dir, m.join(format!("libpod_parent/libpod-{id}")));
        assert_eq!(
            by_cgroup.id,
            std::fs::metadata(&by_cgroup.dir).unwrap().ino()
        );
        let absolute = m.join(format!("libpod_parent/libpod-{id}"));
        assert_eq!(resolve(m, absolute.to_str().unwrap()).unwrap(), by_cgroup);
        let root = resolve(m, "/").unwrap();
        assert_eq!((root.level, root.path.as_str()), (0, "/"));
        let e = resolve(m, "/nope").unwrap_err();
        assert!(e.starts_with("no such cgroup:"), "{e}");
        assert!(resolve(m, "libpod_parent")
            .unwrap_err()
            .contains("not an absolute path"));
        assert!(resolve(m, "/libpod_parent/../x")
            .unwrap_err()
            .contains(".."));
        assert_eq!(threads(&by_cgroup.dir), vec![40, 41, 42]);
    }

    #[test]
    fn a_container_is_found_by_an_id_prefix_in_cgroup_names_or_said_ambiguous() {
        let d = tree();
        let m = d.path();
        let id = "1a2b3c4d5e6f".to_string() + &"0".repeat(52);
        let f = by_id_prefix(m, "1a2b3c4d5e6f", "1a2b3c4d5e6f").unwrap();
        assert_eq!(f.id, id);
        assert_eq!(f.runtime, "podman");
        assert_eq!(f.cgroup_path, format!("/libpod_parent/libpod-{id}"));
        let other = "1a2b3c4d5e6f9".to_string() + &"0".repeat(51);
        std::fs::create_dir_all(m.join(format!("system.slice/docker-{other}.scope"))).unwrap();
        let e = by_id_prefix(m, "1a2b3c4d5e6f", "1a2b3c4d5e6f").unwrap_err();
        assert!(e.contains("ambiguous: 2 containers"), "{e}");
        let e = by_id_prefix(m, "ffffffffffff", "ffffffffffff").unwrap_err();
        assert!(e.starts_with("no cgroup under"), "{e}");
        let logs = m.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join(format!("web-0_prod_engine-{other}.log")), "").unwrap();
        let finder = Finder {
            v2_mount: m.to_path_buf(),
            proc_root: m.join("proc"),
            kubelet_logs: logs,
            ask_runtimes: false,
        };
        let f = find_container(&finder, "engine").unwrap();
        assert_eq!(
            (f.runtime.as_str(), f.id.as_str()),
            ("docker", other.as_str())
        );
        let e = find_container(&finder, "nothing").unwrap_err();
        assert!(
            e.starts_with("no such container (") && e.contains("kubelet log link"),
            "{e}"
        );
    }

    #[test]
    fn runtime_answers_give_id_pid_and_name() {
        let podman = r#"[{"Id":"abc","State":{"Pid":4121},"Name":"js-a"}]"#;
        assert_eq!(
            inspect_fields(podman),
            Some(("abc".into(), 4121, "js-a".into()))
        );
        let docker = r#"[{"Id":"abc","State":{"Pid":7},"Name":"/web"}]"#;
        assert_eq!(inspect_fields(docker).unwrap().2, "web");
        let crictl = r#"{"status":{"id":"abc","metadata":{"name":"engine"}},"info":{"pid":9}}"#;
        assert_eq!(
            inspect_fields(crictl),
            Some(("abc".into(), 9, "engine".into()))
        );
        assert_eq!(
            inspect_fields(r#"[{"Id":"abc","State":{"Pid":0},"Name":"x"}]"#),
            None
        );
        assert_eq!(inspect_fields("[]"), None);
    }
}
