//! Tuning actions are restored — at the end of `tune --hold`, on SIGTERM, and by
//! `jitterscope restore` after SIGKILL — checked by reading every setting back.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use jitterscope::system::actions::STAT_INTERVAL;

/// A `tune --hold` child, ended on drop (also when a test fails) by SIGTERM, which restores
/// its settings, and then by `jitterscope restore` of its journal where it had been killed.
struct Held {
    child: Child,
    journal: std::path::PathBuf,
}

impl std::ops::Deref for Held {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
        if self.journal.exists() {
            let _ = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
                .arg("restore")
                .env("JITTERSCOPE_JOURNAL", &self.journal)
                .output();
        }
    }
}

fn start(journal: &std::path::Path) -> Held {
    let child = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "tune",
            "--cpus",
            "1",
            "--irqs",
            "--kworkers",
            "--stat-interval",
            "7",
            "--shield",
            "--hold",
            "60s",
        ])
        .env("JITTERSCOPE_JOURNAL", journal)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::fs::read_to_string(STAT_INTERVAL).unwrap().trim() != "7"
        && t.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the shield (the last step) time to finish.
    std::thread::sleep(Duration::from_millis(500));
    Held {
        child,
        journal: journal.to_path_buf(),
    }
}

#[test]
fn every_tuning_action_is_restored_on_sigterm_and_by_restore_after_sigkill() {
    if skip_bpf("every_tuning_action_is_restored_on_sigterm_and_by_restore_after_sigkill")
        || fewer_cpus_than(
            "every_tuning_action_is_restored_on_sigterm_and_by_restore_after_sigkill",
            2,
        )
    {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test changes system settings and needs root");
    }
    let _cpus = exclusive();
    let before = snapshot();
    assert_ne!(
        std::fs::read_to_string(STAT_INTERVAL).unwrap().trim(),
        "7",
        "test assumes vm.stat_interval is not already 7"
    );
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");

    // Changed while held…
    let mut child = start(&journal);
    let during = snapshot();
    assert_ne!(during, before, "nothing changed while tuning was held");
    // kthreadd refuses a cpuset; the shield gives it the housekeeping CPU by its affinity, or
    // every kernel thread it forks would start on the cleared CPU.
    let kthreadd = during.iter().find(|(k, _)| k == "kthreadd CPUs");
    let cpus = kthreadd
        .and_then(|(_, v)| v.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| jitterscope::system::cpus::parse_kernel_list(l.trim()));
    assert!(
        cpus.as_ref()
            .is_some_and(|c| !c.is_empty() && !c.contains(&1)),
        "kthreadd under a tune of CPU 1: {kthreadd:?}"
    );
    assert!(journal.exists());
    // …and back after SIGTERM.
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert_eq!(snapshot(), before, "not restored after SIGTERM");
    assert!(!journal.exists());

    // SIGKILL leaves it changed; `restore` puts it back.
    let mut child = start(&journal);
    child.kill().unwrap();
    let _ = child.wait();
    assert_ne!(snapshot(), before);
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .arg("restore")
        .env("JITTERSCOPE_JOURNAL", &journal)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(), before, "not restored by `jitterscope restore`");
    assert!(!journal.exists());
}

#[test]
fn a_held_tune_is_not_undone_by_another_jitterscope() {
    if skip_bpf("a_held_tune_is_not_undone_by_another_jitterscope")
        || fewer_cpus_than("a_held_tune_is_not_undone_by_another_jitterscope", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");
    let mut child = start(&journal);
    let during = snapshot();
    assert_ne!(during, before, "nothing changed while tuning was held");
    // Another jitterscope starting (here `restore`, which every command runs first as
    // `restore_leftovers`) leaves the live holder's changes alone and says who holds them.
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .arg("restore")
        .env("JITTERSCOPE_JOURNAL", &journal)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "jitterscope[{}] holds the tuning changes",
            child.id()
        )),
        "{stderr}"
    );
    assert_eq!(
        snapshot(),
        during,
        "the held changes were undone by another process"
    );
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert_eq!(snapshot(), before, "not restored by the holder");
    assert!(!journal.exists());
    assert!(!journal.with_extension("owner").exists());
}

/// `--cpus` naming every online CPU (this machine's own list) is refused as a usage error
/// before anything is applied; were it not, the tune would hold for one second only, with
/// its own journal, and the settings are compared before and after.
#[test]
fn tune_refuses_to_clear_every_cpu() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .expect("the online CPU list")
        .trim()
        .to_string();
    let _cpus = exclusive();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args(["tune", "--cpus", &online, "--irqs", "--hold", "1s"])
        .env("JITTERSCOPE_JOURNAL", dir.path().join("restore.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "--cpus {online}: {stderr}");
    assert!(
        stderr.contains(&format!("--cpus {online}: every CPU would be cleared")),
        "{stderr}"
    );
    assert_eq!(snapshot(), before, "a setting changed");
}

#[test]
fn an_error_midway_restores_what_was_already_changed() {
    if skip_bpf("an_error_midway_restores_what_was_already_changed")
        || fewer_cpus_than("an_error_midway_restores_what_was_already_changed", 2)
    {
        return;
    }
    let Some((root, _, _)) = jitterscope::system::actions::cpuset_root() else {
        skip(
            "an_error_midway_restores_what_was_already_changed",
            "no cpuset hierarchy mounted",
            Lack::Precondition,
        );
        return;
    };
    let _cpus = exclusive();
    // A leftover cgroup of the same name makes the shield step fail after the earlier steps
    // have changed settings.
    let blocker = format!("{root}/{}", jitterscope::system::actions::SHIELD_NAME);
    std::fs::create_dir(&blocker).expect("create the blocking cgroup");
    struct Rmdir(String);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _rmdir = Rmdir(blocker);
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_jitterscope"))
        .args([
            "tune",
            "--cpus",
            "1",
            "--irqs",
            "--stat-interval",
            "7",
            "--shield",
            "--hold",
            "30s",
        ])
        .env("JITTERSCOPE_JOURNAL", dir.path().join("restore.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot shield CPU 1"), "{stderr}");
    assert_eq!(
        snapshot(),
        before,
        "settings changed before the error were not restored"
    );
    assert!(!dir.path().join("restore.json").exists());
}
