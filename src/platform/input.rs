//! Bounded reads of what comes from outside the program: run files, perf scripts, standard
//! input, `/proc` and sysfs files. Every read stops at its limit while it reads — a device,
//! a pipe or a file that grows has no size to judge beforehand — and the error names the
//! limit that was hit. `-` is standard input. A FIFO, socket or character device named as a
//! file is read with a wait: nothing for `NON_FILE_WAIT` and the read ends, saying what it
//! waited for (a FIFO nobody writes to would otherwise hang the command for ever).

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Duration;

/// How much of one input may be read, and the name the error gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    /// What the limit is for, as the error says it: "the run-file limit".
    pub name: &'static str,
    /// What the bytes must look like, checked as they arrive: what cannot be the input is
    /// refused at its first wrong byte, not after the limit has been read.
    pub shape: Shape,
}

/// What an input's bytes must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Anything (a `/proc` file, read leniently).
    Bytes,
    /// UTF-8 text without NUL bytes (a perf script: a thread's name may hold any byte but
    /// NUL).
    Text,
    /// Text whose first byte other than blanks is `{` (a run file: a JSON object).
    JsonObject,
}

/// A run file: the largest a long run at the top of every ring writes is some tens of MiB.
pub const RUN_FILE: Limit = Limit {
    bytes: 256 << 20,
    name: "the run-file limit",
    shape: Shape::JsonObject,
};

/// `perf script` text for one check: a minute of sched_switch and IRQ events on a few CPUs
/// is some hundreds of MiB at most; anything longer is cut into runs that fit.
pub const PERF_SCRIPT: Limit = Limit {
    bytes: 256 << 20,
    name: "the perf-script limit",
    shape: Shape::Text,
};

/// One `/proc` or sysfs file of a few lines (a task's `status`, a cpulist, a sysctl).
pub const PROC_FILE: Limit = Limit {
    bytes: 1 << 20,
    name: "the /proc file limit",
    shape: Shape::Bytes,
};

/// A `/proc` table that grows with the machine: `/proc/interrupts` with one column per CPU,
/// `/proc/cpuinfo`, `/proc/self/mountinfo`, a cgroup's task list.
pub const PROC_TABLE: Limit = Limit {
    bytes: 64 << 20,
    name: "the /proc table limit",
    shape: Shape::Bytes,
};

/// The restore journal: one entry per setting changed (a few hundred bytes each).
pub const JOURNAL: Limit = Limit {
    bytes: 16 << 20,
    name: "the restore-journal limit",
    shape: Shape::Bytes,
};

/// `/proc/kallsyms`: some 200,000 symbols of 40 bytes on a distribution kernel with modules.
pub const KALLSYMS: Limit = Limit {
    bytes: 256 << 20,
    name: "the /proc/kallsyms limit",
    shape: Shape::Bytes,
};

/// How long a read from a FIFO, socket or character device named as a file waits for its
/// next bytes before it ends.
pub const NON_FILE_WAIT: Duration = Duration::from_secs(10);

/// Why an input could not be read.
#[derive(Debug)]
pub enum InputError {
    /// The open or a read failed.
    Io(io::Error),
    /// More than the limit arrived.
    TooLarge(Limit),
    /// The path is something no reader can take (a directory, a socket).
    NotAFile(&'static str),
    /// A FIFO or device gave nothing for `NON_FILE_WAIT`.
    Silent {
        what: &'static str,
        waited: Duration,
    },
    /// The bytes are not UTF-8 text.
    NotText { offset: usize },
    /// A byte the input's shape cannot hold, seen as it arrived (`Shape`): the read ended
    /// there.
    Refused {
        offset: usize,
        byte: u8,
        limit: Limit,
        /// The byte is the first other than blanks, where a JSON object's `{` must be.
        start: bool,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Io(e) => write!(f, "{e}"),
            InputError::TooLarge(limit) => write!(
                f,
                "more than {} read ({})",
                in_units(limit.bytes),
                limit.name
            ),
            InputError::NotAFile(what) => write!(f, "it is {what}, not a file"),
            InputError::Silent { what, waited } => write!(
                f,
                "it is {what} and nothing arrived for {} s (is anything writing to it?)",
                waited.as_secs()
            ),
            InputError::NotText { offset } => {
                write!(
                    f,
                    "it is not UTF-8 text (an invalid byte at offset {offset})"
                )
            }
            InputError::Refused {
                offset,
                byte,
                limit,
                start,
            } => {
                let shown = match byte.is_ascii_graphic() {
                    true => format!("'{}'", *byte as char),
                    false => format!("byte 0x{byte:02x}"),
                };
                let what = match (start, byte) {
                    (true, _) => format!("it starts with {shown}, not '{{'"),
                    (false, 0) => "a NUL byte".to_string(),
                    (false, _) => format!("{shown}, which is not UTF-8 text,"),
                };
                let shape = match limit.shape {
                    Shape::JsonObject => "JSON text starting with '{'",
                    _ => "text",
                };
                write!(
                    f,
                    "{what} at offset {offset} (this input is {shape} of at most {}, {})",
                    in_units(limit.bytes),
                    limit.name
                )
            }
        }
    }
}

impl std::error::Error for InputError {}

/// A limit in whole MiB or KiB where it is one, else in bytes.
fn in_units(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

impl From<io::Error> for InputError {
    fn from(e: io::Error) -> InputError {
        InputError::Io(e)
    }
}

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// At most `limit` bytes of `path` (`-`: standard input), or why not.
pub fn read_bytes(path: &Path, limit: Limit) -> Result<Vec<u8>, InputError> {
    if is_stdin(path) {
        return read_bounded(io::stdin().lock(), limit);
    }
    let kind = std::fs::metadata(path)?.file_type();
    if kind.is_dir() {
        return Err(InputError::NotAFile("a directory"));
    }
    if kind.is_socket() {
        return Err(InputError::NotAFile("a socket"));
    }
    // Opening a FIFO for reading blocks until a writer opens it: open without waiting, and
    // wait in `Waiting` instead, where the wait is bounded.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nonblocking(kind.is_fifo())
        .open(path)?;
    if kind.is_file() {
        if file.metadata()?.len() > limit.bytes {
            return Err(InputError::TooLarge(limit));
        }
        return read_bounded(file, limit);
    }
    let what = match (kind.is_fifo(), kind.is_char_device()) {
        (true, _) => "a FIFO",
        (false, true) => "a character device",
        (false, false) => "a block device",
    };
    read_bounded(Waiting { file, what }, limit)
}

/// At most `limit` bytes of `path` as UTF-8 text, or why not.
pub fn read_text(path: &Path, limit: Limit) -> Result<String, InputError> {
    into_text(read_bytes(path, limit)?)
}

/// At most `limit` bytes of a `/proc` or sysfs file as text (invalid UTF-8 replaced), or
/// None when it cannot be read or is longer than the limit.
pub fn read_proc(path: impl AsRef<Path>, limit: Limit) -> Option<String> {
    read_proc_or_error(path, limit).ok()
}

/// Numeric field `n` of a `/proc/PID/stat` line, numbered as proc(5) numbers them (3: the
/// state, 9: the flags, 22: the start time). The command name (field 2) may hold spaces and
/// parentheses: the fields are counted after its last `)`.
pub fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// At most `limit` bytes of a `/proc`, sysfs or cgroup file as text (invalid UTF-8
/// replaced), or the error: the system's (its kind kept: `NotFound` stays `NotFound`), or
/// one naming the limit.
pub fn read_proc_or_error(path: impl AsRef<Path>, limit: Limit) -> io::Result<String> {
    match read_bounded(File::open(path)?, limit) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(InputError::Io(e)) => Err(e),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// The bytes as text, or where they stop being UTF-8.
pub fn into_text(bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| InputError::NotText {
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Bytes read from an input at a time before they are checked against its shape.
const CHUNK: usize = 64 << 10;

/// Reads to the end, failing as soon as more than `limit` bytes have arrived or a byte that
/// `limit.shape` cannot hold has.
pub fn read_bounded(reader: impl Read, limit: Limit) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    let mut reader = reader.take(limit.bytes + 1);
    let mut checked = Checked::default();
    loop {
        let n = (&mut reader).take(CHUNK as u64).read_to_end(&mut bytes)?;
        checked.check(&bytes, limit)?;
        if bytes.len() as u64 > limit.bytes {
            return Err(InputError::TooLarge(limit));
        }
        if n == 0 {
            return Ok(bytes);
        }
    }
}

/// How far an input's bytes were found to fit its shape.
#[derive(Debug, Default)]
struct Checked {
    /// Bytes up to here are whole UTF-8 characters without NUL.
    upto: usize,
    /// The first byte other than blanks was seen (and was `{` for a JSON object).
    begun: bool,
}

impl Checked {
    /// The bytes after `upto` against `limit.shape`; a character cut by the end of what has
    /// arrived is checked when the rest comes.
    fn check(&mut self, bytes: &[u8], limit: Limit) -> Result<(), InputError> {
        if limit.shape == Shape::Bytes {
            return Ok(());
        }
        let refused = |offset: usize, start: bool| InputError::Refused {
            offset,
            byte: bytes[offset],
            limit,
            start,
        };
        let new = &bytes[self.upto..];
        // The earliest wrong byte is named: the start (blanks, then '{'), then NULs and
        // bytes that are not UTF-8.
        if limit.shape == Shape::JsonObject && !self.begun {
            if let Some(at) = new.iter().position(|b| !b.is_ascii_whitespace()) {
                if new[at] != b'{' {
                    return Err(refused(self.upto + at, true));
                }
                self.begun = true;
            }
        }
        let nul = new.iter().position(|&b| b == 0);
        let (valid, invalid) = match std::str::from_utf8(new) {
            Ok(_) => (new.len(), None),
            Err(e) => (e.valid_up_to(), e.error_len().map(|_| e.valid_up_to())),
        };
        match (nul, invalid) {
            (Some(a), Some(b)) => return Err(refused(self.upto + a.min(b), false)),
            (Some(a), None) | (None, Some(a)) => return Err(refused(self.upto + a, false)),
            // A character cut by the end of what arrived is checked when the rest comes.
            (None, None) => self.upto += valid,
        }
        Ok(())
    }
}

trait NonBlocking {
    fn custom_flags_nonblocking(&mut self, on: bool) -> &mut Self;
}

impl NonBlocking for std::fs::OpenOptions {
    fn custom_flags_nonblocking(&mut self, on: bool) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(if on { libc::O_NONBLOCK } else { 0 })
    }
}

/// A FIFO or device whose every read waits at most `NON_FILE_WAIT` for bytes.
struct Waiting {
    file: File,
    what: &'static str,
}

impl Read for Waiting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut waited = Duration::ZERO;
        let step = Duration::from_millis(100);
        loop {
            let mut pfd = libc::pollfd {
                fd: self.file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, step.as_millis() as libc::c_int) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n > 0 {
                match self.file.read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    r => return r,
                }
            }
            waited += step;
            if waited >= NON_FILE_WAIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    InputError::Silent {
                        what: self.what,
                        waited: NON_FILE_WAIT,
                    },
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_field_is_counted_after_the_command_names_last_parenthesis() {
        let stat = "2 (a) b (c)) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 17 0 0";
        assert_eq!(stat_field(stat, 4), Some(0));
        assert_eq!(stat_field(stat, 9), Some(2_129_984));
        assert_eq!(stat_field(stat, 22), Some(17));
        assert_eq!(stat_field(stat, 3), None, "the state is no number");
        assert_eq!(stat_field(stat, 2), None);
        assert_eq!(stat_field(stat, 99), None);
        assert_eq!(stat_field("no parenthesis 1 2 3", 4), None);
    }

    const TINY: Limit = Limit {
        bytes: 8,
        name: "the test limit",
        shape: Shape::Bytes,
    };

    /// An input that would go on for ever, each read handing out `chunk` again; counts what
    /// was taken.
    struct Endless<'a> {
        chunk: &'a [u8],
        taken: usize,
    }

    impl Read for Endless<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk.len());
            buf[..n].copy_from_slice(&self.chunk[..n]);
            self.taken += n;
            Ok(n)
        }
    }

    #[test]
    fn what_cannot_be_the_input_is_refused_at_its_first_wrong_byte() {
        let mut random = [0u8; 4096];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for b in random.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        for (what, chunk, limit) in [
            ("zeros as a run file", &[0u8; 4096][..], RUN_FILE),
            ("random bytes as a run file", &random[..], RUN_FILE),
            ("zeros as a perf script", &[0u8; 4096][..], PERF_SCRIPT),
            ("random bytes as a perf script", &random[..], PERF_SCRIPT),
        ] {
            let mut input = Endless { chunk, taken: 0 };
            let e = read_bounded(&mut input, limit).unwrap_err();
            assert!(matches!(e, InputError::Refused { .. }), "{what}: {e}");
            assert!(
                input.taken <= 2 * CHUNK,
                "{what}: {} bytes taken before the refusal",
                input.taken
            );
            let said = e.to_string();
            assert!(
                said.contains("at most 256 MiB") && said.contains(limit.name),
                "{what}: {said}"
            );
        }
        // A run file may start with blanks; its first other byte is what counts.
        let e = read_bounded(&b"  \n [1]"[..], RUN_FILE).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("it starts with '[', not '{' at offset 4"),
            "{e}"
        );
        assert_eq!(
            read_bounded(&b" {\"a\": 1}"[..], RUN_FILE).unwrap(),
            b" {\"a\": 1}"
        );
        // A character cut between two reads is whole once the rest arrives.
        let split = "{\"µs\": 1}".as_bytes();
        let mut checked = Checked::default();
        checked.check(&split[..3], RUN_FILE).unwrap();
        checked.check(split, RUN_FILE).unwrap();
        assert_eq!(checked.upto, split.len());
        // Well-formed text that never ends still ends at the limit.
        let mut blanks = Endless {
            chunk: b"{                ",
            taken: 0,
        };
        let small = Limit {
            bytes: 1 << 20,
            ..RUN_FILE
        };
        assert!(matches!(
            read_bounded(&mut blanks, small),
            Err(InputError::TooLarge(_))
        ));
    }

    #[test]
    fn a_read_stops_at_its_limit_and_names_it() {
        assert_eq!(read_bounded(&b"12345678"[..], TINY).unwrap(), b"12345678");
        let e = read_bounded(io::repeat(0), TINY).unwrap_err();
        assert_eq!(e.to_string(), "more than 8 bytes read (the test limit)");
        let e = read_bytes(Path::new("/dev/zero"), TINY).unwrap_err();
        assert_eq!(e.to_string(), "more than 8 bytes read (the test limit)");
    }

    #[test]
    fn directories_sockets_and_bad_text_are_named() {
        let d = tempfile::tempdir().unwrap();
        let e = read_bytes(d.path(), TINY).unwrap_err();
        assert_eq!(e.to_string(), "it is a directory, not a file");
        let sock = d.path().join("s");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = read_bytes(&sock, TINY).unwrap_err();
        assert_eq!(e.to_string(), "it is a socket, not a file");
        let f = d.path().join("f");
        std::fs::write(&f, b"ab\xffc").unwrap();
        let e = read_text(&f, TINY).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is not UTF-8 text (an invalid byte at offset 2)"
        );
        std::fs::write(&f, b"123456789").unwrap();
        assert!(matches!(read_bytes(&f, TINY), Err(InputError::TooLarge(_))));
    }

    #[test]
    fn a_fifo_is_read_when_written_to() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, b"hello").unwrap())
        };
        assert_eq!(read_text(&fifo, TINY).unwrap(), "hello");
        writer.join().unwrap();
    }

    #[test]
    fn a_proc_read_ends_at_its_limit_and_keeps_the_systems_error_kind() {
        // A device in place of a /proc file (a fake /proc, a bind mount) never ends.
        let e = read_proc_or_error("/dev/zero", TINY).unwrap_err();
        assert!(
            e.to_string()
                .contains("more than 8 bytes read (the test limit)"),
            "{e}"
        );
        assert_eq!(read_proc("/dev/zero", TINY), None);
        let e = read_proc_or_error("/nonexistent/x", TINY).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            read_proc("/proc/self/stat", PROC_FILE).map(|s| s.is_empty()),
            Some(false)
        );
    }
}
