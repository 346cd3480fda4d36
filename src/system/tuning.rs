//! System settings jitterscope changes (IRQ affinity, workqueue cpumask, sysctls, governor,
//! cpusets) — always through a restore journal: every change is recorded, with the old value,
//! in one file *before* it is made; dropping the `Tuner` (normal end, error, a signal that
//! ends the run) puts everything back in reverse order, and `jitterscope restore` (or the next
//! start) undoes what a killed run left behind.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::Cpu;
use crate::platform::{affinity, input};
use crate::system::cpus::{format_list, parse_kernel_list};

/// The one file jitterscope writes outside its output directory. `/run` is a tmpfs: like the
/// settings themselves, the journal does not survive a reboot.
pub const JOURNAL: &str = "/run/jitterscope/restore.json";

/// `JITTERSCOPE_JOURNAL` overrides the path (tests).
pub fn journal_path() -> PathBuf {
    std::env::var_os("JITTERSCOPE_JOURNAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(JOURNAL))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A sysfs/procfs file and what it held before (trimmed).
    Write {
        path: String,
        old: String,
        new: String,
    },
    /// A cgroup jitterscope created: on restore, the tasks in it (`tasks_file`) go back to
    /// `back_to` and the directory is removed — right also after a SIGKILL, since the
    /// membership is read at restore time.
    Cgroup {
        path: String,
        tasks_file: String,
        back_to: String,
    },
    /// The CPUs a task may run on (`sched_setaffinity`), for a task that cannot join a
    /// cpuset (kthreadd): put back only while the same task holds the pid (`start`, its
    /// start time in clock ticks since boot).
    Affinity {
        pid: u32,
        start: u64,
        comm: String,
        old: String,
        new: String,
    },
}

impl Change {
    pub fn describe(&self) -> String {
        match self {
            Change::Write { path, old, .. } => format!("restored {path} to {old}"),
            Change::Cgroup { path, back_to, .. } => {
                format!("moved the tasks of {path} back to {back_to} and removed it")
            }
            Change::Affinity { pid, comm, old, .. } => {
                format!("gave {comm}[{pid}] back CPU {old}")
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {value:?} to {path}: {source}{hint}")]
    Write {
        path: String,
        value: String,
        source: std::io::Error,
        hint: String,
    },
    #[error("cannot create cgroup {path}: {source}")]
    Cgroup {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot set the CPUs of {comm}[{pid}] to {cpus}: {source}")]
    Affinity {
        pid: u32,
        comm: String,
        cpus: String,
        source: std::io::Error,
    },
    #[error("cannot write the restore journal {path}: {source}; nothing was changed")]
    Journal {
        path: String,
        source: std::io::Error,
    },
}

fn hint_for(path: &str, e: &std::io::Error) -> String {
    let refused = matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EPERM | libc::EACCES)
    );
    if refused && path.starts_with("/proc/irq/") {
        // Root gets EPERM/EIO for kernel-managed (multiqueue) IRQs too.
        "; the kernel manages this IRQ's affinity (or this is not root): managed IRQs move only with isolcpus=managed_irq,<cpus> at boot".into()
    } else if refused {
        "; run jitterscope as root".into()
    } else {
        String::new()
    }
}

/// Applied changes, restored on drop.
#[derive(Debug)]
pub struct Tuner {
    journal: PathBuf,
    changes: Vec<Change>,
}

fn read_setting(path: &str) -> Result<String, TuningError> {
    input::read_proc_or_error(path, input::PROC_FILE)
        .map(|s| s.trim().to_string())
        .map_err(|source| TuningError::Read {
            path: path.into(),
            source,
        })
}

/// The file beside a journal naming the process that holds its changes: `pid start`, the
/// start being the process's start time in clock ticks since boot (`/proc/PID/stat` field
/// 22), so that a pid reused by another process is not taken for the owner.
fn owner_path(journal: &Path) -> PathBuf {
    journal.with_extension("owner")
}

/// A process's start time (clock ticks since boot), None when it does not exist.
fn start_time(pid: u32) -> Option<u64> {
    let stat = input::read_proc(format!("/proc/{pid}/stat"), input::PROC_FILE)?;
    input::stat_field(&stat, 22)
}

/// The live process that holds a journal's changes (a `tune --hold`, a workshop step), if
/// any: its changes are its to restore, not a leftover.
pub fn journal_owner(journal: &Path) -> Option<u32> {
    let text = input::read_proc(owner_path(journal), input::PROC_FILE)?;
    let mut f = text.split_whitespace();
    let (pid, start): (u32, u64) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
    (start_time(pid) == Some(start)).then_some(pid)
}

fn write_journal(path: &Path, changes: &[Change]) -> std::io::Result<()> {
    if changes.is_empty() {
        let _ = std::fs::remove_file(owner_path(path));
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let me = std::process::id();
    if let Some(start) = start_time(me) {
        std::fs::write(owner_path(path), format!("{me} {start}\n"))?;
    }
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(changes).unwrap_or_default();
    // A fresh private file, never through a symlink planted at the temporary name.
    let _ = std::fs::remove_file(&tmp);
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

impl Tuner {
    pub fn new() -> Tuner {
        Tuner::with_journal(journal_path())
    }

    pub fn with_journal(journal: PathBuf) -> Tuner {
        Tuner {
            journal,
            changes: Vec::new(),
        }
    }

    fn journal(&self, pending: &[Change]) -> Result<(), TuningError> {
        write_journal(&self.journal, pending).map_err(|source| TuningError::Journal {
            path: self.journal.display().to_string(),
            source,
        })
    }

    /// Writes `value` to `path`, journalling the old value first. Writing the value a setting
    /// already has is not journalled.
    pub fn set(&mut self, path: &str, value: &str) -> Result<(), TuningError> {
        let old = read_setting(path)?;
        if old == value.trim() {
            return Ok(());
        }
        let change = Change::Write {
            path: path.into(),
            old,
            new: value.trim().into(),
        };
        self.journalled(change, || {
            std::fs::write(path, value).map_err(|source| TuningError::Write {
                path: path.into(),
                value: value.into(),
                hint: hint_for(path, &source),
                source,
            })
        })
    }

    /// Creates a cgroup directory whose tasks go back to `back_to` on restore.
    pub fn create_cgroup(
        &mut self,
        path: &str,
        tasks_file: &str,
        back_to: &str,
    ) -> Result<(), TuningError> {
        let change = Change::Cgroup {
            path: path.into(),
            tasks_file: tasks_file.into(),
            back_to: back_to.into(),
        };
        self.journalled(change, || {
            std::fs::create_dir(path).map_err(|source| TuningError::Cgroup {
                path: path.into(),
                source,
            })
        })
    }

    /// Restricts task `pid` to `cpus`, journalling the CPUs it had first (unchanged CPUs are
    /// not journalled).
    pub fn set_affinity(&mut self, pid: u32, cpus: &[Cpu]) -> Result<(), TuningError> {
        let comm = input::read_proc(format!("/proc/{pid}/comm"), input::PROC_FILE)
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        let fail = |source| TuningError::Affinity {
            pid,
            comm: comm.clone(),
            cpus: format_list(cpus),
            source,
        };
        let old = affinity::thread_cpus(pid).map_err(fail)?;
        let start =
            start_time(pid).ok_or_else(|| fail(std::io::Error::from_raw_os_error(libc::ESRCH)))?;
        if old == cpus {
            return Ok(());
        }
        let change = Change::Affinity {
            pid,
            start,
            comm: comm.clone(),
            old: format_list(&old),
            new: format_list(cpus),
        };
        self.journalled(change, || {
            affinity::set_thread_cpus(pid, cpus).map_err(fail)
        })
    }

    /// Journals `change`, then makes it (`make`); one that could not be made is taken out of
    /// the journal again.
    fn journalled(
        &mut self,
        change: Change,
        make: impl FnOnce() -> Result<(), TuningError>,
    ) -> Result<(), TuningError> {
        let mut pending = self.changes.clone();
        pending.push(change.clone());
        self.journal(&pending)?;
        if let Err(e) = make() {
            let _ = write_journal(&self.journal, &self.changes);
            return Err(e);
        }
        self.changes.push(change);
        Ok(())
    }

    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Puts every setting back, newest first; returns what could not be restored.
    pub fn restore(&mut self) -> Vec<String> {
        let failed = restore_changes(&self.changes);
        self.changes.clear();
        let _ = write_journal(&self.journal, &[]);
        failed
    }
}

impl Default for Tuner {
    fn default() -> Self {
        Tuner::new()
    }
}

impl Drop for Tuner {
    fn drop(&mut self) {
        for f in self.restore() {
            eprintln!("WARNING: {f}");
        }
    }
}

fn restore_changes(changes: &[Change]) -> Vec<String> {
    let mut failed = Vec::new();
    for c in changes.iter().rev() {
        match c {
            Change::Write { path, old, .. } => {
                if let Err(e) = std::fs::write(path, old) {
                    failed.push(format!(
                        "could not restore {path} to {old:?}: {e}; set it by hand: echo {old} > {path}"
                    ));
                }
            }
            Change::Cgroup {
                path,
                tasks_file,
                back_to,
            } => {
                if let Err(e) = empty_and_remove_cgroup(path, tasks_file, back_to) {
                    failed.push(format!(
                        "could not remove cgroup {path}: {e}; move its tasks to {back_to} and rmdir it by hand"
                    ));
                }
            }
            Change::Affinity {
                pid,
                start,
                comm,
                old,
                ..
            } => {
                // A task that ended (or whose pid is another's now) has nothing to put back.
                if start_time(*pid) != Some(*start) {
                    continue;
                }
                let cpus = parse_kernel_list(old).unwrap_or_default();
                if let Err(e) = affinity::set_thread_cpus(*pid, &cpus) {
                    failed.push(format!(
                        "could not give {comm}[{pid}] back CPU {old}: {e}; set it by hand: taskset -pc {old} {pid}"
                    ));
                }
            }
        }
    }
    failed
}

/// Moves every task of a cgroup back and removes it. Tasks fork while they are being moved
/// (a shield holds most of the system) and an exiting task lingers in the list for a moment,
/// so this repeats until the directory goes, for up to two seconds.
fn empty_and_remove_cgroup(path: &str, tasks_file: &str, back_to: &str) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let members =
            match input::read_proc_or_error(format!("{path}/{tasks_file}"), input::PROC_TABLE) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
        for pid in members.lines().filter(|l| !l.trim().is_empty()) {
            // A task that exited meanwhile is fine (ESRCH).
            let _ = std::fs::write(back_to, pid.trim());
        }
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Undoes what a killed run left in the journal. Returns the restored changes (none when
/// there was no journal); errors name the settings that could not be restored.
pub fn restore_from_journal() -> Result<Vec<Change>, String> {
    let path = journal_path();
    if let Some(pid) = journal_owner(&path).filter(|&p| p != std::process::id()) {
        return Err(format!(
            "jitterscope[{pid}] holds the tuning changes in {} and restores them when it ends: they are left as they are (end it with kill -INT {pid})",
            path.display()
        ));
    }
    let text = match input::read_text(&path, input::JOURNAL) {
        Ok(t) => t,
        Err(input::InputError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Vec::new())
        }
        Err(e) => return Err(damaged(&path, &e.to_string())),
    };
    if text.trim().is_empty() {
        return Err(damaged(&path, "it is empty"));
    }
    let changes: Vec<Change> =
        serde_json::from_str(&text).map_err(|e| damaged(&path, &e.to_string()))?;
    let failed = restore_changes(&changes);
    if !failed.is_empty() {
        return Err(failed.join("\n"));
    }
    std::fs::remove_file(&path)
        .map_err(|e| format!("restored, but cannot remove {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(owner_path(&path));
    Ok(changes)
}

/// Why a restore journal could not be used, one line, with what to do: the journal is left
/// where it is (it may still list settings to put back by hand).
fn damaged(path: &Path, why: &str) -> String {
    let p = path.display();
    format!(
        "the restore journal {p} cannot be used ({why}): nothing was restored; put back by hand any setting it still lists (`jitterscope check` shows the CPUs' settings), then remove it: rm {p}"
    )
}

/// Puts back what a killed jitterscope left changed, before anything else starts: each
/// setting restored is a note on standard error, a failure a WARNING (the command goes on).
pub fn restore_leftovers() {
    match restore_from_journal() {
        Ok(restored) => {
            for c in restored {
                eprintln!(
                    "note: {} (left changed by a killed jitterscope)",
                    c.describe()
                );
            }
        }
        Err(e) if journal_owner(&journal_path()).is_some() => eprintln!("note: {e}"),
        Err(e) => eprintln!("WARNING: {e}"),
    }
}

/// `jitterscope restore`: undoes the restore journal and lists what it put back.
pub fn restore_command(out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let changes = restore_from_journal().map_err(|e| anyhow::anyhow!(e))?;
    if changes.is_empty() {
        writeln!(
            out,
            "nothing to restore: no restore journal at {}",
            journal_path().display()
        )?;
    }
    for c in &changes {
        writeln!(out, "{}", c.describe())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_that_never_ends_is_refused_at_the_proc_file_limit() {
        let e = read_setting("/dev/zero").unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read /dev/zero: more than 1 MiB read (the /proc file limit)"),
            "{e}"
        );
    }
}
