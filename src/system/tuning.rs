//! System settings jitterscope changes (IRQ affinity, workqueue cpumask, sysctls, governor,
//! cpusets) — always through a restore journal: every change is recorded, with the old value,
//! in one file *before* it is made; dropping the `Tuner` (normal end, error, a signal that
//! ends the run) puts everything back in reverse order, and `jitterscope restore` (or the next
//! start) undoes what a killed run left behind.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
pub struct Change {
    /// A sysfs/procfs file.
    pub path: String,
    /// What it held before (trimmed).
    pub old: String,
    /// What jitterscope wrote.
    pub new: String,
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
    #[error("cannot write the restore journal {path}: {source}; nothing was changed")]
    Journal {
        path: String,
        source: std::io::Error,
    },
}

fn hint_for(path: &str, e: &std::io::Error) -> String {
    match (e.raw_os_error(), path) {
        (Some(libc::EIO), p) if p.starts_with("/proc/irq/") => {
            "; this IRQ's affinity is managed by the kernel (isolcpus=managed_irq at boot moves it)"
                .into()
        }
        (Some(libc::EACCES) | Some(libc::EPERM), _) => "; run jitterscope as root".into(),
        _ => String::new(),
    }
}

/// Applied changes, restored on drop.
#[derive(Debug)]
pub struct Tuner {
    journal: PathBuf,
    changes: Vec<Change>,
}

fn read_setting(path: &str) -> Result<String, TuningError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| TuningError::Read {
            path: path.into(),
            source,
        })
}

fn write_journal(path: &Path, changes: &[Change]) -> std::io::Result<()> {
    if changes.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(changes).unwrap_or_default();
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
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

    /// Writes `value` to `path`, journalling the old value first. Writing the value a setting
    /// already has is not journalled.
    pub fn set(&mut self, path: &str, value: &str) -> Result<(), TuningError> {
        let old = read_setting(path)?;
        if old == value.trim() {
            return Ok(());
        }
        let change = Change {
            path: path.into(),
            old,
            new: value.trim().into(),
        };
        let mut pending = self.changes.clone();
        pending.push(change.clone());
        write_journal(&self.journal, &pending).map_err(|source| TuningError::Journal {
            path: self.journal.display().to_string(),
            source,
        })?;
        if let Err(source) = std::fs::write(path, value) {
            // Not made: take it out of the journal again.
            let _ = write_journal(&self.journal, &self.changes);
            let hint = hint_for(path, &source);
            return Err(TuningError::Write {
                path: path.into(),
                value: value.into(),
                source,
                hint,
            });
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
        if let Err(e) = std::fs::write(&c.path, &c.old) {
            failed.push(format!(
                "could not restore {} to {:?}: {e}; set it by hand: echo {} > {}",
                c.path, c.old, c.old, c.path
            ));
        }
    }
    failed
}

/// Undoes what a killed run left in the journal. Returns the restored changes (none when
/// there was no journal); errors name the settings that could not be restored.
pub fn restore_from_journal() -> Result<Vec<Change>, String> {
    let path = journal_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(format!(
                "cannot read the restore journal {}: {e}",
                path.display()
            ))
        }
    };
    let changes: Vec<Change> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "the restore journal {} is damaged ({e}); its content:\n{text}",
            path.display()
        )
    })?;
    let failed = restore_changes(&changes);
    if !failed.is_empty() {
        return Err(failed.join("\n"));
    }
    std::fs::remove_file(&path)
        .map_err(|e| format!("restored, but cannot remove {}: {e}", path.display()))?;
    Ok(changes)
}
