//! Hostile and broken inputs, as docs/inputs.md lists them: every file and stream
//! jitterscope reads gets one clear line and exit 1 (2 for a usage error), bounded in time
//! and memory, never a panic. No BPF, no root.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Far above the one second these take, far below "never ends".
const WALL_GUARD: Duration = Duration::from_secs(20);
/// The issue's bound on a refused input's memory.
const MAX_RSS_KIB: i64 = 300 << 10;

struct Ended {
    code: Option<i32>,
    stderr: String,
    stdout: String,
    max_rss_kib: i64,
    took: Duration,
}

fn js() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jitterscope"))
}

fn seed(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/seeds/run_file")
        .join(name)
}

/// Runs `cmd` with `stdin` (a file, or nothing), killed after `WALL_GUARD`; its peak
/// resident memory from wait4's rusage.
fn run(mut cmd: Command, stdin: Option<&Path>) -> Ended {
    cmd.stdin(match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    });
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let err_file = tempfile::NamedTempFile::new().unwrap();
    cmd.stdout(out_file.reopen().unwrap())
        .stderr(err_file.reopen().unwrap());
    // SAFETY: setpgid is async-signal-safe; the child gets its own group to kill.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let start = Instant::now();
    let child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let killer = std::thread::spawn(move || {
        while start.elapsed() < WALL_GUARD {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: probing with signal 0 only.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return;
            }
        }
        // SAFETY: the child's own process group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    });
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; waiting for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    let took = start.elapsed();
    killer.join().unwrap();
    std::mem::forget(child);
    Ended {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stderr: std::fs::read_to_string(err_file.path()).unwrap(),
        stdout: std::fs::read_to_string(out_file.path()).unwrap(),
        max_rss_kib: usage.ru_maxrss,
        took,
    }
}

/// Exit 1 within the guard, one line on standard error containing `says`, no panic, memory
/// under the bound.
fn refused(what: &str, e: &Ended, says: &str) {
    assert!(
        e.took < WALL_GUARD,
        "{what}: still running after {:?}",
        WALL_GUARD
    );
    assert_eq!(e.code, Some(1), "{what}: {}", e.stderr);
    assert_eq!(e.stderr.lines().count(), 1, "{what}: {}", e.stderr);
    assert!(e.stderr.starts_with("Error: "), "{what}: {}", e.stderr);
    assert!(e.stderr.contains(says), "{what}: {}", e.stderr);
    assert!(!e.stderr.contains("panicked"), "{what}: {}", e.stderr);
    assert!(
        e.max_rss_kib < MAX_RSS_KIB,
        "{what}: {} KiB resident",
        e.max_rss_kib
    );
}

/// No part of the message is said twice (the cause repeated after itself).
fn said_once(what: &str, e: &Ended, part: &str) {
    assert_eq!(e.stderr.matches(part).count(), 1, "{what}: {}", e.stderr);
}

/// Endless inputs that cannot be what is read end at their first wrong byte, the message
/// naming the limit; one that could be (blanks after a `{`) ends at the limit.
#[test]
fn endless_devices_and_streams_end_at_the_limit_in_bounded_memory() {
    let limit = "at most 256 MiB, the run-file limit";
    let mut c = js();
    c.args(["report", "/dev/zero"]);
    let e = run(c, None);
    refused("report /dev/zero", &e, limit);
    said_once("report /dev/zero", &e, limit);
    assert!(
        e.stderr
            .contains("/dev/zero: not a run file: it starts with byte 0x00, not '{' at offset 0"),
        "{}",
        e.stderr
    );

    let mut c = Command::new("sh");
    c.arg("-c").arg(format!(
        "(printf '{{'; yes '') | {} report -",
        env!("CARGO_BIN_EXE_jitterscope")
    ));
    refused(
        "report - < an endless '{' and blanks",
        &run(c, None),
        "more than 256 MiB read (the run-file limit)",
    );

    let mut c = js();
    c.args(["report", "/dev/stdin"]);
    refused(
        "report /dev/stdin < /dev/urandom",
        &run(c, Some(Path::new("/dev/urandom"))),
        limit,
    );
    let mut c = js();
    c.args(["report", "-"]);
    refused(
        "report - < /dev/zero",
        &run(c, Some(Path::new("/dev/zero"))),
        limit,
    );

    let perf_limit = "at most 256 MiB, the perf-script limit";
    let mut c = js();
    c.args(["verify", "--run"])
        .arg(seed("valid.json"))
        .args(["--perf-script", "/dev/zero"]);
    refused("verify --perf-script /dev/zero", &run(c, None), perf_limit);
    let mut c = js();
    c.args(["verify", "--run"])
        .arg(seed("valid.json"))
        .args(["--perf-script", "-"]);
    refused(
        "verify --perf-script - < /dev/zero",
        &run(c, Some(Path::new("/dev/zero"))),
        perf_limit,
    );
    let mut c = js();
    c.args(["verify", "--run", "/dev/zero", "--perf-script", "/dev/null"]);
    refused("verify --run /dev/zero", &run(c, None), limit);
}

#[test]
fn a_fifo_nobody_writes_to_ends_saying_what_it_waited_for() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("f");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut cmd = js();
    cmd.arg("report").arg(&fifo);
    refused(
        "report FIFO",
        &run(cmd, None),
        "it is a FIFO and nothing arrived for 10 s (is anything writing to it?)",
    );
    // With a writer it is read like a file.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            std::fs::write(&fifo, std::fs::read(seed("valid.json")).unwrap()).unwrap()
        })
    };
    let mut cmd = js();
    cmd.arg("report").arg(&fifo);
    let e = run(cmd, None);
    writer.join().unwrap();
    assert_eq!(e.code, Some(0), "{}", e.stderr);
}

#[test]
fn files_that_cannot_be_run_files_get_one_line_each() {
    let d = tempfile::tempdir().unwrap();
    let at = |name: &str| d.path().join(name);
    let valid = std::fs::read_to_string(seed("valid.json")).unwrap();
    let sock = at("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::os::unix::fs::symlink(at("loop"), at("loop")).unwrap();
    std::fs::write(
        at("latin1.json"),
        b"{\"schema\": \"jitterscope.run/2\xe9\"}",
    )
    .unwrap();
    std::fs::write(at("truncated.json"), &valid[..valid.len() / 2]).unwrap();
    std::fs::write(at("twice.json"), format!("{valid}{valid}")).unwrap();
    let deep = format!(
        "{{\"schema\": \"jitterscope.run/2\", \"x\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(at("deep.json"), deep).unwrap();
    let mut wide = String::from("{\"schema\": \"jitterscope.run/2\", \"x\": [");
    wide.push_str(&"0,".repeat(3_000_000));
    wide.push_str("0]}");
    std::fs::write(at("wide.json"), wide).unwrap();
    let huge_number = valid.replacen("\"duration_ns\": ", "\"duration_ns\": 1e400", 1);
    assert_ne!(huge_number, valid);
    std::fs::write(at("huge_number.json"), huge_number).unwrap();
    let cases: [(&str, PathBuf, &str); 9] = [
        (
            "directory",
            d.path().into(),
            "it is a directory, not a file",
        ),
        ("socket", sock.clone(), "it is a socket, not a file"),
        ("symlink loop", at("loop"), "(os error 40)"),
        (
            "non-UTF-8",
            at("latin1.json"),
            "not a run file: byte 0xe9, which is not UTF-8 text, at offset 29",
        ),
        ("truncated", at("truncated.json"), "the file is truncated"),
        (
            "concatenated",
            at("twice.json"),
            "invalid JSON: trailing characters",
        ),
        ("deep", at("deep.json"), "not a jitterscope run file"),
        ("wide", at("wide.json"), "not a jitterscope run file"),
        ("huge number", at("huge_number.json"), "number out of range"),
    ];
    for (what, path, says) in cases {
        let mut c = js();
        c.arg("report").arg(&path);
        let e = run(c, None);
        refused(what, &e, says);
        assert!(
            e.stderr.contains("cannot read run file"),
            "{what}: {}",
            e.stderr
        );
    }
    let mut c = js();
    c.arg("report").arg(at("missing.json"));
    let e = run(c, None);
    refused("missing", &e, "No such file or directory (os error 2)");
    said_once("missing", &e, "No such file or directory");
}

#[test]
fn a_dash_is_standard_input() {
    let valid = seed("valid.json");
    let mut c = js();
    c.args(["report", "-"]);
    let e = run(c, Some(&valid));
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let mut file = js();
    file.arg("report").arg(&valid);
    assert_eq!(e.stdout, run(file, None).stdout);

    let mut c = js();
    c.args(["compare", "-"]).arg(&valid);
    let e = run(c, Some(&valid));
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let mut c = js();
    c.args(["compare", "-", "-"]);
    let e = run(c, Some(&valid));
    assert_eq!(e.code, Some(2), "{}", e.stderr);
    assert!(
        e.stderr.contains("standard input (-) can be given once"),
        "{}",
        e.stderr
    );

    let mut c = js();
    c.args(["report", "-"]);
    let e = run(c, None);
    refused("report - < /dev/null", &e, "(standard input): it is empty");
}

#[test]
fn compare_of_two_runs_globs_skips_their_perfetto_traces() {
    let d = tempfile::tempdir().unwrap();
    let valid = seed("valid.json");
    // Two runs' files as a run leaves them: NAME.json and NAME.trace.json.
    let mut given = Vec::new();
    for run_name in ["a-20261128T010000Z", "b-20261128T010100Z"] {
        let run_file = d.path().join(format!("{run_name}.json"));
        std::fs::copy(&valid, &run_file).unwrap();
        let trace = d.path().join(format!("{run_name}.trace.json"));
        let mut c = js();
        c.arg("report")
            .arg(&run_file)
            .args(["--format", "perfetto", "--output"])
            .arg(&trace);
        assert_eq!(run(c, None).code, Some(0));
        // What the shell expands `a-*.json` to: sorted, the trace after its run file.
        given.push(run_file);
        given.push(trace);
    }
    let mut c = js();
    c.arg("compare").args(&given);
    let e = run(c, None);
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    for trace in [&given[1], &given[3]] {
        assert!(
            e.stderr.contains(&format!(
                "note: skipped {}: it is the Perfetto trace of",
                trace.display()
            )),
            "{}",
            e.stderr
        );
    }
    // A trace without its run file is read, and refused as what it is not.
    let mut c = js();
    c.arg("compare").arg(&given[0]).arg(&given[3]);
    let e = run(c, None);
    assert_eq!(e.code, Some(1), "{}", e.stderr);
    assert!(
        e.stderr.contains(&given[3].display().to_string()),
        "{}",
        e.stderr
    );
    let _ = std::io::stderr().flush();
}

/// A restore journal that cannot be used — truncated, garbage bytes, JSON of another shape,
/// empty — gets one line from `jitterscope restore` naming the journal, why and what to do,
/// exit 1, and is left where it is; a good one beside them is restored and removed.
#[test]
fn a_broken_restore_journal_says_what_is_wrong_and_what_to_do() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("restore.json");
    let cases: [(&str, &[u8], &str); 5] = [
        (
            "truncated",
            br#"[{"kind": "write", "path": "/proc/sys/kernel/x", "old": "1""#,
            "EOF while parsing",
        ),
        ("garbage", &[0xff, 0xfe, 0x00, 0x17, 0x80], "not UTF-8"),
        (
            "another schema",
            br#"{"schema": "jitterscope.run/2", "run": {}}"#,
            "invalid type: map",
        ),
        (
            "unknown change",
            br#"[{"kind": "teleport", "path": "/x"}]"#,
            "unknown variant `teleport`",
        ),
        ("empty", b"", "it is empty"),
    ];
    for (what, bytes, why) in cases {
        std::fs::write(&journal, bytes).unwrap();
        let mut cmd = js();
        cmd.arg("restore").env("JITTERSCOPE_JOURNAL", &journal);
        let e = run(cmd, None);
        refused(
            what,
            &e,
            &format!("the restore journal {}", journal.display()),
        );
        for part in [why, "nothing was restored", "rm "] {
            assert!(
                e.stderr.contains(part),
                "{what}: {part:?} not in {}",
                e.stderr
            );
        }
        said_once(what, &e, why);
        assert_eq!(
            std::fs::read(&journal).unwrap(),
            bytes,
            "{what}: the journal was changed"
        );
    }
    // A journal of no change is used and removed.
    std::fs::write(&journal, b"[]").unwrap();
    let mut cmd = js();
    cmd.arg("restore").env("JITTERSCOPE_JOURNAL", &journal);
    let e = run(cmd, None);
    assert_eq!(e.code, Some(0), "{}{}", e.stdout, e.stderr);
    assert!(!journal.exists());
}

/// A perf script of another layout — another perf version's, or `-F` without the CPU, time or
/// trace fields — is refused by `verify` naming what it lacks and the field list it needs,
/// not read as a script with no events of the CPU.
#[test]
fn a_perf_script_of_another_layout_says_what_is_missing() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (
            "-F comm,tid,time,event,trace",
            "      sh    77   100.000000001: sched:sched_switch: prev_comm=sh prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n",
            "without perf's CPU and time columns",
        ),
        (
            "-F cpu,time,event",
            "[001]   100.000000001: sched:sched_switch:\n",
            "without its fields: perf printed no trace fields",
        ),
    ];
    for (what, text, says) in cases {
        let script = d.path().join("perf.txt");
        std::fs::write(&script, text).unwrap();
        let mut c = js();
        c.args(["verify", "--run"])
            .arg(seed("valid.json"))
            .arg("--perf-script")
            .arg(&script);
        let e = run(c, None);
        refused(what, &e, says);
        assert!(
            e.stderr.contains("-F cpu,time,event,trace"),
            "{what}: {}",
            e.stderr
        );
        said_once(what, &e, says);
    }
}
