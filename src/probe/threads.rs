//! Which threads are the workload's and which process is jitterscope, in the kernel's
//! numbering: `js_whoami` run in a thread's own context tells its ids (a PID namespace numbers
//! threads its own way), the process id goes to the probes before anything is attached, and
//! workload threads go into the BPF side's tid table.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use super::abi::Whoami;
use super::drain::Command;
use super::{JitterscopeSkel, ProbeError};

/// The section of `js_whoami`, the program that tells a thread its kernel ids: always loaded,
/// never attached.
pub(super) const WHOAMI_SECTION: &str = "raw_tp";

/// Asks `js_whoami` (see the BPF code) about the calling thread. A PID namespace numbers
/// threads its own way (`getpid()` is 1 in a container); the programs compare with the
/// kernel's numbers, which only a program run in the thread's own context can tell.
pub(super) fn ask(prog: BorrowedFd<'_>, question: Whoami) -> Result<u32, ProbeError> {
    let ctx = (question as u64).to_ne_bytes();
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        ctx_in: ctx.as_ptr().cast(),
        ctx_size_in: ctx.len() as u32,
        ..Default::default()
    };
    // SAFETY: `opts` is a properly sized bpf_test_run_opts whose only input buffer (`ctx`)
    // outlives the call; without BPF_F_TEST_RUN_ON_CPU the program runs in this thread.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc != 0 {
        return Err(ProbeError::Identity {
            what: match question {
                Whoami::Tgid => "jitterscope's process id",
                Whoami::Tid => "a workload thread's id",
                Whoami::Ns => "jitterscope's PID namespace",
            },
            cause: std::io::Error::from_raw_os_error(-rc).to_string(),
        });
    }
    Ok(opts.retval)
}

/// Registers workload threads with the probes, each from the thread itself (its kernel id is
/// known only there). Cheap to clone and usable from any thread while the session runs.
#[derive(Clone)]
pub struct ThreadRegistrar {
    pub(super) whoami: Arc<OwnedFd>,
    pub(super) commands: Sender<Command>,
}

impl ThreadRegistrar {
    /// Puts the calling thread in the probes' workload table (its runs stop being
    /// interruptions from now on) and returns its thread id in the kernel's numbering.
    pub fn register_current_thread(&self) -> Result<u32, ProbeError> {
        let tid = ask(self.whoami.as_fd(), Whoami::Tid)?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.commands
            .send(Command::SetWorkloadTids(vec![tid], tx))
            .map_err(|_| ProbeError::ThreadGone)?;
        rx.recv().map_err(|_| ProbeError::ThreadGone)??;
        Ok(tid)
    }
}

/// How the kernel knows this process: what `self` is compared with, and the program that
/// answers a thread's "who am I".
pub(super) struct Identity {
    pub(super) tgid: u32,
    pub(super) whoami: Arc<OwnedFd>,
}

/// Learns this process's kernel id and sets `self_tgid` with it, before anything is attached.
pub(super) fn learn_identity(skel: &mut JitterscopeSkel) -> Result<Identity, ProbeError> {
    let whoami_fd = skel
        .progs
        .js_whoami
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| ProbeError::Other {
            action: "keep the js_whoami program".into(),
            cause: e.to_string(),
        })?;
    let tgid = ask(whoami_fd.as_fd(), Whoami::Tgid)?;
    match skel.maps.bss_data.as_deref_mut() {
        Some(bss) => bss.self_tgid = tgid,
        None => {
            return Err(ProbeError::Other {
                action: "tell the probes jitterscope's own process id".into(),
                cause: "the BPF object's .bss is not memory-mapped".into(),
            })
        }
    }
    Ok(Identity {
        tgid,
        whoami: Arc::new(whoami_fd),
    })
}

/// Puts `tids` in the programs' workload table (the drain thread's side of
/// `ProbeSession::set_workload_tids` and `ThreadRegistrar`).
pub(super) fn set_workload_tids(
    skel: &mut JitterscopeSkel,
    tids: &[u32],
) -> Result<(), ProbeError> {
    let filled = match skel.maps.bss_data.as_deref_mut() {
        Some(bss) => register_tids(&mut bss.workload_tids, tids),
        None => Err("the BPF object's .bss is not memory-mapped".to_string()),
    };
    filled.map_err(|cause| ProbeError::Other {
        action: "register the workload threads with the probes".into(),
        cause,
    })
}

/// Fills the BPF side's 2-way set-associative tid table (see `is_workload` in the BPF code).
pub fn register_tids(table: &mut [u32], tids: &[u32]) -> Result<(), String> {
    let sets = table.len() / 2;
    for &tid in tids {
        let set = (tid as usize & (sets - 1)) * 2;
        if table[set] == tid || table[set + 1] == tid {
            continue;
        }
        let slot = if table[set] == 0 {
            set
        } else if table[set + 1] == 0 {
            set + 1
        } else {
            return Err(format!(
                "thread {tid} collides with threads {} and {} in the probes' table",
                table[set],
                table[set + 1]
            ));
        };
        // SAFETY: a plain aligned u32 store into memory the BPF programs read concurrently.
        unsafe { std::ptr::write_volatile(&mut table[slot], tid) };
    }
    Ok(())
}
