//! How many tasks may run on each CPU: every thread's `Cpus_allowed_list`.

use super::{parse_cpulist, read_capped};
use crate::model::Cpu;
use crate::system::config::{Root, TasksAllowed};

/// The scan's bound, in threads: far above a busy server's, and a few seconds of reading at
/// most.
pub(crate) const MAX_TASKS: usize = 65536;

/// PF_KTHREAD in `/proc/<pid>/stat`'s flags (field 9).
const PF_KTHREAD: u64 = 0x0020_0000;

/// A status file's useful part is its first few KiB.
const MAX_STATUS_BYTES: u64 = 16 << 10;

pub(super) fn allowed(root: &Root, cpus: &[Cpu]) -> Vec<TasksAllowed> {
    let mut counts: Vec<TasksAllowed> = cpus
        .iter()
        .map(|&cpu| TasksAllowed {
            cpu,
            ..TasksAllowed::default()
        })
        .collect();
    if cpus.is_empty() {
        return counts;
    }
    let mut seen = 0usize;
    let mut truncated = false;
    'pids: for pid in numbered(&root.path("/proc")) {
        for tid in numbered(&root.path(&format!("/proc/{pid}/task"))) {
            if seen >= MAX_TASKS {
                truncated = true;
                break 'pids;
            }
            let dir = root.path(&format!("/proc/{pid}/task/{tid}"));
            let Some(status) = read_capped(&dir.join("status"), MAX_STATUS_BYTES) else {
                continue;
            };
            let Some(allowed) =
                field(&status, "Cpus_allowed_list:").and_then(|v| parse_cpulist(v, None))
            else {
                continue;
            };
            seen += 1;
            let kthread = match field(&status, "Kthread:") {
                Some(v) => v == "1",
                None => stat_kthread(&dir),
            };
            for count in counts
                .iter_mut()
                .filter(|c| allowed.binary_search(&c.cpu).is_ok())
            {
                if kthread {
                    count.kthreads += 1;
                } else {
                    count.tasks += 1;
                }
            }
        }
    }
    for count in &mut counts {
        count.truncated = truncated;
    }
    counts
}

fn field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
}

/// PF_KTHREAD from `stat`'s flags (field 9), for kernels before 6.x's `Kthread:` line.
fn stat_kthread(dir: &std::path::Path) -> bool {
    read_capped(&dir.join("stat"), MAX_STATUS_BYTES)
        .and_then(|stat| crate::platform::input::stat_field(&stat, 9))
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// The numeric entries of a directory (pids, tids), in order.
fn numbered(dir: &std::path::Path) -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}
