//! What to watch: the user's `--pid`, `--tid`, `--comm`, `--cgroup`, `--container` or
//! command, checked against /proc and the cgroup v2 hierarchy before anything is loaded (bad
//! input is a usage error; a container is resolved to its cgroup first), then found in the
//! kernel's numbering through the probes' task list; and each thread's scheduler statistics
//! (time on a CPU and time waiting for one), the denominator of the share a watch reports.

use std::path::Path;

use crate::model::Nanos;
use crate::platform::input;
use crate::probe::watch::TaskRow;
use crate::system::cgroup::{self, Cgroup, FoundContainer};

/// What the user asked to watch (ids as the user sees them: this PID namespace's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every thread of a process, and the threads it creates while watched.
    Pid(u32),
    Tids(Vec<u32>),
    /// Threads whose name (comm) is this, or starts with it when it ends in `*`.
    Comm(String),
    /// Start this command and watch it (and the threads it creates); its exit ends the watch.
    Command(Vec<String>),
    /// Every thread in this cgroup v2 directory (its path as `/proc/PID/cgroup` shows it, or
    /// an absolute path under the v2 mount) and its descendants, and the threads created in or
    /// moved into it while watched; `container` when it is one found by `--container`.
    Cgroup {
        path: String,
        container: Option<FoundContainer>,
    },
    /// A container by name or id: `resolve` makes it the `Cgroup` of that container.
    Container(String),
}

impl Target {
    /// `--pid 4121`, for messages and the run file.
    pub fn describe(&self) -> String {
        match self {
            Target::Pid(p) => format!("--pid {p}"),
            Target::Tids(t) => format!(
                "--tid {}",
                t.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            ),
            Target::Comm(c) => format!("--comm {c}"),
            Target::Command(argv) => format!("-- {}", argv.join(" ")),
            Target::Cgroup {
                container: Some(c), ..
            } => format!(
                "container {} ({} {})",
                c.name,
                c.runtime,
                &c.id[..c.id.len().min(12)]
            ),
            Target::Cgroup { path, .. } => format!("--cgroup {path}"),
            Target::Container(asked) => format!("--container {asked}"),
        }
    }

    /// The cgroup path watched (`--cgroup`, or a resolved `--container`).
    pub fn cgroup_path(&self) -> Option<&str> {
        match self {
            Target::Cgroup { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The container watched (a resolved `--container`).
    pub fn container(&self) -> Option<&FoundContainer> {
        match self {
            Target::Cgroup { container, .. } => container.as_ref(),
            _ => None,
        }
    }
}

/// `--container NAME|ID` made the `Cgroup` of that container (through its runtime's CLI, or
/// by the cgroup naming conventions); `--cgroup PATH` checked to be a v2 cgroup. Bad input is
/// a `TargetError`; no cgroup v2 mount here is a plain error (the machine, not the input).
pub fn resolve(target: Target) -> anyhow::Result<Target> {
    let mount =
        || cgroup::live_v2_mount().map_err(|e| anyhow::anyhow!("{}: {e}", target.describe()));
    match &target {
        Target::Container(asked) => {
            let finder = cgroup::Finder::live(mount()?);
            let found = cgroup::find_container(&finder, asked)
                .map_err(|e| TargetError(format!("--container {asked}: {e}")))?;
            cgroup::resolve(&finder.v2_mount, &found.cgroup_path).map_err(|e| {
                TargetError(format!(
                    "--container {asked}: its cgroup {}: {e}",
                    found.cgroup_path
                ))
            })?;
            Ok(Target::Cgroup {
                path: found.cgroup_path.clone(),
                container: Some(found),
            })
        }
        Target::Cgroup { .. } => {
            let m = mount()?;
            cgroup_of_at(&m, &target)?;
            Ok(target)
        }
        _ => Ok(target),
    }
}

/// The v2 cgroup a `Cgroup` target names, on this machine.
pub fn cgroup_of(target: &Target) -> Result<Cgroup, TargetError> {
    let mount =
        cgroup::live_v2_mount().map_err(|e| TargetError(format!("{}: {e}", target.describe())))?;
    cgroup_of_at(&mount, target)
}

fn cgroup_of_at(mount: &Path, target: &Target) -> Result<Cgroup, TargetError> {
    let path = target.cgroup_path().unwrap_or("/");
    cgroup::resolve(mount, path).map_err(|e| TargetError(format!("{}: {e}", target.describe())))
}

/// The threads in a cgroup's directory and its descendants now, as /proc shows them (a thread
/// gone meanwhile is left out).
pub fn threads_in(proc: &Path, dir: &Path) -> Vec<Found> {
    cgroup::threads(dir)
        .into_iter()
        .filter_map(|tid| {
            let pid = tgid_of(proc, tid)?;
            Some(Found {
                pid,
                tid,
                comm: comm_of(proc, pid, tid),
            })
        })
        .collect()
}

/// Bad input: said in one line, exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(pub String);

/// A thread that matched, as /proc shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// The tgid of `tid` from /proc/TID/status (None when there is no such thread).
fn tgid_of(proc: &Path, tid: u32) -> Option<u32> {
    let status = input::read_proc(proc.join(tid.to_string()).join("status"), input::PROC_FILE)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

pub(super) fn comm_of(proc: &Path, pid: u32, tid: u32) -> String {
    input::read_proc(
        proc.join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("comm"),
        input::PROC_FILE,
    )
    .map(|s| s.trim_end().to_string())
    .unwrap_or_default()
}

fn threads_of(proc: &Path, pid: u32) -> Vec<Found> {
    let mut out: Vec<Found> = std::fs::read_dir(proc.join(pid.to_string()).join("task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .map(|tid| Found {
            pid,
            tid,
            comm: comm_of(proc, pid, tid),
        })
        .collect();
    out.sort_by_key(|f| f.tid);
    out
}

fn comm_matches(pattern: &str, comm: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => comm.starts_with(prefix),
        None => comm == pattern,
    }
}

/// The threads `target` names now, from /proc (a command is started later, not here).
pub fn check(target: &Target, proc: &Path) -> Result<Vec<Found>, TargetError> {
    match target {
        Target::Pid(pid) => match tgid_of(proc, *pid) {
            Some(tgid) if tgid == *pid => Ok(threads_of(proc, *pid)),
            Some(tgid) => Err(TargetError(format!(
                "--pid {pid}: {pid} is a thread of process {tgid}, not a process; give --pid {tgid} for all its threads or --tid {pid} for this one"
            ))),
            None => Err(TargetError(format!(
                "--pid {pid}: no such process (is it running in this PID namespace? see `pidof NAME`)"
            ))),
        },
        Target::Tids(tids) => tids
            .iter()
            .map(|&tid| match tgid_of(proc, tid) {
                Some(pid) => Ok(Found {
                    pid,
                    tid,
                    comm: comm_of(proc, pid, tid),
                }),
                None => Err(TargetError(format!(
                    "--tid {tid}: no such thread (list a process's threads with `ps -L -p PID`)"
                ))),
            })
            .collect(),
        Target::Comm(pattern) => {
            let mut found = Vec::new();
            for pid in std::fs::read_dir(proc)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            {
                found.extend(
                    threads_of(proc, pid)
                        .into_iter()
                        .filter(|f| comm_matches(pattern, &f.comm)),
                );
            }
            if found.is_empty() {
                return Err(TargetError(format!(
                    "--comm {pattern}: no thread has that name (names are at most 15 characters; end with * to match a prefix; see `ps -eLo tid,comm`)"
                )));
            }
            Ok(found)
        }
        Target::Command(_) => Ok(Vec::new()),
        Target::Cgroup { .. } => Ok(threads_in(proc, &cgroup_of(target)?.dir)),
        Target::Container(asked) => Err(TargetError(format!(
            "--container {asked}: not resolved to its cgroup (target::resolve)"
        ))),
    }
}

/// The kernel's rows for what was found (by the ids the user sees); a thread gone meanwhile
/// is left out.
pub fn in_kernel<'a>(found: &[Found], rows: &'a [TaskRow]) -> Vec<&'a TaskRow> {
    rows.iter()
        .filter(|r| found.iter().any(|f| f.tid == r.tid))
        .collect()
}

/// Time on a CPU and time waiting on a runqueue so far (ns), from
/// /proc/PID/task/TID/schedstat; None when it cannot be read (exited, or no CONFIG_SCHED_INFO).
pub fn schedstat(proc: &Path, pid: u32, tid: u32) -> Option<(Nanos, Nanos)> {
    let text = input::read_proc(
        proc.join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("schedstat"),
        input::PROC_FILE,
    )?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (pid, tid, comm) in [(10, 10, "engine"), (10, 11, "md-spin"), (20, 20, "md-spin")] {
            let t = d.path().join(format!("{pid}/task/{tid}"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("comm"), format!("{comm}\n")).unwrap();
            std::fs::write(t.join("schedstat"), "1500 250 7\n").unwrap();
            let s = d.path().join(tid.to_string());
            std::fs::create_dir_all(&s).unwrap();
            std::fs::write(s.join("status"), format!("Name:\t{comm}\nTgid:\t{pid}\n")).unwrap();
        }
        d
    }

    #[test]
    fn a_tasks_files_that_never_end_are_unknown_not_a_hang() {
        let d = fake_proc();
        let t = d.path().join("10/task/11");
        for f in ["comm", "schedstat"] {
            std::fs::remove_file(t.join(f)).unwrap();
            std::os::unix::fs::symlink("/dev/zero", t.join(f)).unwrap();
        }
        assert_eq!(schedstat(d.path(), 10, 11), None);
        assert_eq!(comm_of(d.path(), 10, 11), "");
        assert_eq!(schedstat(d.path(), 10, 10), Some((1500, 250)));
    }

    #[test]
    fn each_kind_of_target_finds_its_threads_or_says_why_not() {
        let d = fake_proc();
        let p = d.path();
        let tids = |r: Vec<Found>| r.into_iter().map(|f| f.tid).collect::<Vec<_>>();
        assert_eq!(tids(check(&Target::Pid(10), p).unwrap()), vec![10, 11]);
        let e = check(&Target::Pid(11), p).unwrap_err().to_string();
        assert!(
            e.contains("thread of process 10") && e.contains("--tid 11"),
            "{e}"
        );
        let e = check(&Target::Pid(99), p).unwrap_err().to_string();
        assert!(e.starts_with("--pid 99: no such process"), "{e}");
        assert_eq!(
            tids(check(&Target::Tids(vec![11, 20]), p).unwrap()),
            vec![11, 20]
        );
        let e = check(&Target::Tids(vec![11, 98]), p)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--tid 98: no such thread"), "{e}");
        let mut m = tids(check(&Target::Comm("md-spin".into()), p).unwrap());
        m.sort();
        assert_eq!(m, vec![11, 20]);
        assert_eq!(
            tids(check(&Target::Comm("eng*".into()), p).unwrap()),
            vec![10]
        );
        let e = check(&Target::Comm("nothing".into()), p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--comm nothing: no thread has that name"),
            "{e}"
        );
        assert_eq!(schedstat(p, 10, 11), Some((1500, 250)));
        assert_eq!(schedstat(p, 10, 12), None);
    }
}
