//! The output directory and the files in it. Files are created without following symlinks
//! and without clobbering (O_EXCL on a private temporary name, then rename), mode 0644, and
//! handed to the invoking user when jitterscope runs under sudo.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    // The io error is part of each message, not a `source`: printed as a chain (`{:#}`), it
    // would be said twice.
    #[error("--output {path}: cannot create the directory: {cause}; choose a writable directory")]
    CreateDir { path: String, cause: std::io::Error },
    #[error("--output {path}: exists and is not a directory; choose a directory")]
    NotADirectory { path: String },
    #[error(
        "--output {path}: the directory is not writable: {cause}; choose a writable directory"
    )]
    NotWritable { path: String, cause: std::io::Error },
    #[error("cannot write {path}: {cause}{}", write_hint(.cause))]
    Write { path: String, cause: std::io::Error },
}

/// The fix for a failed write, by its cause.
fn write_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => {
            "; the file system is full — free some space or write somewhere else"
        }
        Some(libc::EACCES | libc::EPERM) => "; not allowed — choose a directory you can write to",
        Some(libc::EROFS) => "; the file system is read-only — write somewhere else",
        Some(libc::ELOOP) => {
            "; a symbolic link is in the way, and jitterscope does not follow links it did not make — remove it or choose another name"
        }
        Some(libc::EEXIST) => "; a file of that name is in the way — remove it or choose another name",
        Some(libc::ENOENT) => "; its directory is gone — create it again or write somewhere else",
        _ => "",
    }
}

/// The invoking user when run through sudo (`SUDO_UID`/`SUDO_GID`), whose files these are.
fn sudo_owner() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some((uid, gid))
}

fn hand_to_invoking_user(path: &Path) {
    if let Some((uid, gid)) = sudo_owner() {
        // Best effort: a failure leaves the file owned by root, which is still readable.
        let _ = std::os::unix::fs::lchown(path, Some(uid), Some(gid));
    }
}

#[derive(Debug, Clone)]
pub struct OutputDir {
    dir: PathBuf,
}

impl OutputDir {
    /// Creates the directory (and parents) if needed and checks that it takes files.
    pub fn prepare(dir: &Path) -> Result<OutputDir, OutputError> {
        let shown = dir.display().to_string();
        if dir.exists() && !dir.is_dir() {
            return Err(OutputError::NotADirectory { path: shown });
        }
        if !dir.exists() {
            // Hand over every directory level we create, not only the last.
            let mut created = Vec::new();
            let mut p = dir.to_path_buf();
            while !p.as_os_str().is_empty() && !p.exists() {
                created.push(p.clone());
                if !p.pop() {
                    break;
                }
            }
            std::fs::create_dir_all(dir).map_err(|cause| OutputError::CreateDir {
                path: shown.clone(),
                cause,
            })?;
            for d in created {
                hand_to_invoking_user(&d);
            }
        }
        let out = OutputDir {
            dir: dir.to_path_buf(),
        };
        let probe = out
            .dir
            .join(format!(".jitterscope-probe.{}", std::process::id()));
        match create_new(&probe) {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                Ok(out)
            }
            Err(cause) => Err(OutputError::NotWritable { path: shown, cause }),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a whole file atomically: a crash leaves either the old file or the new one.
    pub fn write(&self, name: &str, contents: &[u8]) -> Result<PathBuf, OutputError> {
        let dest = self.path(name);
        write_file(&dest, contents)?;
        Ok(dest)
    }

    /// Creates a new file for streaming (the interval log); refuses to follow a symlink or
    /// reuse an existing file.
    pub fn create_stream(&self, name: &str) -> Result<(PathBuf, File), OutputError> {
        let dest = self.path(name);
        let f = create_new(&dest).map_err(|cause| OutputError::Write {
            path: dest.display().to_string(),
            cause,
        })?;
        hand_to_invoking_user(&dest);
        Ok((dest, f))
    }
}

/// Writes a whole file anywhere (`report -o`, `compare --svg`): through a fresh private
/// temporary file next to it (O_EXCL, O_NOFOLLOW, 0644) renamed over the destination, so a
/// symlink planted at either name is never followed and a crash leaves the old file or the
/// new one, never half of it. Handed to the invoking user under sudo.
///
/// Not a file: `/dev/stdout` and `/dev/stderr` are this process's own streams; a character
/// device or a FIFO at the name itself (`-o /dev/null`, a named pipe) is written to as it is
/// — renamed over, the device node would have become a file (as root, `/dev/null` replaced
/// by a plain file breaks other programs). Only root makes device nodes, so one found there
/// was not planted; a symlink is still never followed.
pub fn write_file(dest: &Path, contents: &[u8]) -> Result<(), OutputError> {
    let err = |cause| OutputError::Write {
        path: dest.display().to_string(),
        cause,
    };
    if let Some(result) = write_not_a_file(dest, contents) {
        return result.map_err(err);
    }
    let name = dest
        .file_name()
        .ok_or_else(|| err(std::io::Error::from_raw_os_error(libc::EISDIR)))?
        .to_string_lossy()
        .into_owned();
    let tmp = dest.with_file_name(format!(".{name}.tmp.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = create_new(&tmp)?;
        f.write_all(contents)?;
        f.sync_data()?;
        std::fs::rename(&tmp, dest)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e));
    }
    hand_to_invoking_user(dest);
    Ok(())
}

/// `write_file` to what is not a file: None when `dest` is a file, a directory or absent.
fn write_not_a_file(dest: &Path, contents: &[u8]) -> Option<std::io::Result<()>> {
    use std::os::unix::fs::FileTypeExt;
    let stream = |mut w: Box<dyn Write>| w.write_all(contents).and_then(|_| w.flush());
    if dest == Path::new("/dev/stdout") {
        return Some(stream(Box::new(std::io::stdout().lock())));
    }
    if dest == Path::new("/dev/stderr") {
        return Some(stream(Box::new(std::io::stderr().lock())));
    }
    let kind = std::fs::symlink_metadata(dest).ok()?.file_type();
    if kind.is_char_device() || kind.is_fifo() {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dest);
        return Some(f.and_then(|f| stream(Box::new(f))));
    }
    if kind.is_block_device() || kind.is_socket() {
        return Some(Err(std::io::Error::other(
            "a block device or a socket, not a file; give a file name",
        )));
    }
    None
}

fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// A file-name-safe form of a label.
pub fn file_stem(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "run".to_string()
    } else {
        s
    }
}

/// `YYYYmmddTHHMMSSZ` for a Unix time (UTC), for file names that sort by time.
pub fn utc_stamp(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_known_dates() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_795_387_501 * 1_000_000_000), "20261122T224501Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
    }

    #[test]
    fn labels_become_safe_stems() {
        assert_eq!(file_stem("pinned run/1"), "pinned_run_1");
        assert_eq!(file_stem("../x"), "_x");
        assert_eq!(file_stem(""), "run");
    }

    #[test]
    fn refuses_to_follow_a_planted_symlink() {
        let d = tempfile::tempdir().unwrap();
        let out = OutputDir::prepare(d.path()).unwrap();
        let target = d.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("a.hlog")).unwrap();
        assert!(out.create_stream("a.hlog").is_err());
        out.write("a.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    /// `report -o PIPE` (and `-o /dev/null`, a character device): written into, not replaced
    /// by a file renamed over it.
    #[test]
    fn a_named_pipe_is_written_into_and_stays_a_pipe() {
        use std::os::unix::fs::FileTypeExt;
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, b"the report").unwrap();
        // First (a pipe replaced would leave the reader waiting for a writer forever).
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(kind.is_fifo(), "{kind:?}");
        assert_eq!(reader.join().unwrap(), b"the report");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }
}
