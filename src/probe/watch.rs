//! Watch mode's side of the probes: the tasks the kernel has, with their ids in the kernel's
//! numbering and in jitterscope's PID namespace (the `js_tasks` iterator), and the watched
//! threads put into the programs' `watched` map (kept current by the programs themselves on
//! fork and exit).

use std::io::Read;
use std::os::fd::AsFd;

use libbpf_rs::{Iter, MapCore, MapFlags};

use super::abi::{self, Whoami};
use super::skel::types::{js_task_row, js_watched};
use super::threads;
use super::{JitterscopeSkel, OpenJitterscopeSkel, ProbeError};

const _: () = assert!(std::mem::size_of::<js_task_row>() == 32);
const _: () = assert!(std::mem::size_of::<js_watched>() == 40);

/// One task as the kernel has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    pub kernel_tid: u32,
    pub kernel_tgid: u32,
    /// Ids in jitterscope's PID namespace: what the user sees and gives.
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
}

fn bss_error(action: &str) -> ProbeError {
    ProbeError::Other {
        action: action.into(),
        cause: "the BPF object's .bss is not memory-mapped".into(),
    }
}

/// Tells the programs jitterscope's PID namespace (js_whoami run in this thread), so that the
/// iterator and new-thread records report ids the user sees.
pub(super) fn learn_namespace(skel: &JitterscopeSkel) -> Result<(), ProbeError> {
    threads::ask(skel.progs.js_whoami.as_fd(), Whoami::Ns).map(|_| ())
}

/// Every task visible in jitterscope's PID namespace.
pub(super) fn list_tasks(skel: &JitterscopeSkel) -> Result<Vec<TaskRow>, ProbeError> {
    let fail = |e: String| ProbeError::Other {
        action: "list the tasks (js_tasks iterator)".into(),
        cause: e,
    };
    let link = skel
        .progs
        .js_tasks
        .attach_iter_with_opts(libbpf_rs::IterOpts::None)
        .map_err(|e| fail(format!("{e:#}")))?;
    let mut iter = Iter::new(&link).map_err(|e| fail(format!("{e:#}")))?;
    let mut bytes = Vec::new();
    iter.read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    Ok(parse_rows(&bytes))
}

/// The iterator's output: whole `js_task_row`s back to back.
fn parse_rows(bytes: &[u8]) -> Vec<TaskRow> {
    bytes
        .chunks_exact(std::mem::size_of::<js_task_row>())
        .map(|c| {
            let word = |i: usize| u32::from_ne_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
            let comm = &c[16..32];
            let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            TaskRow {
                kernel_tid: word(0),
                kernel_tgid: word(4),
                tid: word(8),
                pid: word(12),
                comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
            }
        })
        .collect()
}

/// The most threads the `watched` map may be sized for: a hash map's entries are made at
/// load, some 100 bytes each (key, 40-byte value, the kernel's element header), so this is
/// some 100 MiB of kernel memory at most.
pub const WATCH_CAPACITY_MAX: u32 = 1 << 20;

/// The `watched` map's size for a target of `threads` threads: room for it to double, never
/// below `abi::WATCH_MAX`, never above `WATCH_CAPACITY_MAX`.
pub fn capacity_for(threads: usize) -> u32 {
    let wanted = u32::try_from(threads.saturating_mul(2)).unwrap_or(u32::MAX);
    wanted.clamp(abi::WATCH_MAX, WATCH_CAPACITY_MAX)
}

/// Sizes the `watched` map before load.
pub(super) fn size(open: &mut OpenJitterscopeSkel, capacity: u32) -> Result<(), ProbeError> {
    open.maps
        .watched
        .set_max_entries(capacity)
        .map_err(|e| ProbeError::Other {
            action: format!("size the watched-thread map for {capacity} threads"),
            cause: format!("{e:#}"),
        })
}

/// What `watch_threads` did: the threads it could not watch because the map is full.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Added {
    /// Kernel tids left out, in the order given.
    pub left_out: Vec<u32>,
    /// The map's size.
    pub capacity: u32,
}

/// Puts threads (kernel tids) into the `watched` map — a thread already there keeps what the
/// programs know of it; once the map is full the rest are left out and returned — and, with
/// `follow`, has new threads of that process (kernel tgid) watched from their creation.
pub(super) fn watch_threads(
    skel: &mut JitterscopeSkel,
    tids: &[u32],
    follow: Option<u32>,
) -> Result<Added, ProbeError> {
    let fresh = [0u8; std::mem::size_of::<js_watched>()];
    let mut added = Added {
        left_out: Vec::new(),
        capacity: skel.maps.watched.max_entries(),
    };
    for &tid in tids {
        match skel
            .maps
            .watched
            .update(&tid.to_ne_bytes(), &fresh, MapFlags::NO_EXIST)
        {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => {}
            // A full hash map refuses a new key with E2BIG.
            Err(e) if e.kind() == libbpf_rs::ErrorKind::TooBig => added.left_out.push(tid),
            Err(e) => {
                return Err(ProbeError::Other {
                    action: format!("watch thread {tid}"),
                    cause: format!("{e:#}"),
                })
            }
        }
    }
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .ok_or_else(|| bss_error("watch the threads"))?;
    if let Some(tgid) = follow {
        // Every watched thread is that process's: the programs skip other processes' tasks
        // without a lookup.
        bss.watch_tgid = tgid;
        bss.watch_only_tgid = tgid;
    }
    // Cached "is the current task watched" answers are redone.
    bss.watch_gen = bss.watch_gen.wrapping_add(1);
    Ok(added)
}

/// Has the threads of a v2 cgroup (its id, the kernfs inode number of its directory, at depth
/// `level` below the root) and of its descendants watched from their creation or their move
/// into it.
pub(super) fn watch_cgroup(
    skel: &mut JitterscopeSkel,
    id: u64,
    level: u32,
) -> Result<(), ProbeError> {
    if level > abi::CGROUP_LEVEL_MAX {
        return Err(ProbeError::Other {
            action: "watch a cgroup".into(),
            cause: format!(
                "it is {level} levels deep; the probes follow cgroups at most {} levels below the root",
                abi::CGROUP_LEVEL_MAX
            ),
        });
    }
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .ok_or_else(|| bss_error("watch a cgroup"))?;
    bss.watch_cgroup_level = level;
    bss.watch_cgroup = id;
    bss.watch_gen = bss.watch_gen.wrapping_add(1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_map_is_sized_from_the_target() {
        assert_eq!(capacity_for(0), abi::WATCH_MAX);
        assert_eq!(capacity_for(17_000), 34_000);
        assert_eq!(capacity_for(usize::MAX), WATCH_CAPACITY_MAX);
    }

    #[test]
    fn iterator_rows_parse_whole_and_stop_at_a_short_tail() {
        let mut bytes = Vec::new();
        for (k, kg, t, p, comm) in [
            (1001u32, 1000u32, 11u32, 10u32, "mdp-consumer"),
            (7, 7, 7, 7, ""),
        ] {
            for w in [k, kg, t, p] {
                bytes.extend_from_slice(&w.to_ne_bytes());
            }
            let mut c = [0u8; 16];
            c[..comm.len()].copy_from_slice(comm.as_bytes());
            bytes.extend_from_slice(&c);
        }
        bytes.extend_from_slice(&[1, 2, 3]);
        let rows = parse_rows(&bytes);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            TaskRow {
                kernel_tid: 1001,
                kernel_tgid: 1000,
                tid: 11,
                pid: 10,
                comm: "mdp-consumer".into()
            }
        );
        assert_eq!(rows[1].comm, "");
    }
}
