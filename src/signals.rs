//! SIGINT, SIGTERM and SIGHUP end a run early but cleanly: the handler only sets a flag
//! that the session polls, so probes detach, workload threads stop and the report and the
//! run files are still written (marked `interrupted`). Installed first thing in `main`, so a
//! signal during start-up is seen too; signals that arrive while the files are being written
//! do not cut the writing short (SIGKILL is the way to abandon it).

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // The first signal decides (the exit code is 128 + its number); later ones change nothing.
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Installs the handlers (idempotent). A signal the process was started with ignored stays
/// ignored, as shells and `nohup` mean it: `nohup jitterscope … &` outlives the terminal's
/// SIGHUP, and a background job of a script keeps running through the SIGINT of a Ctrl-C.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler is async-signal-safe (a single atomic store); the structures
        // are plain C data, zeroed then filled.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that asked us to stop, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

/// The shell's convention for "ended by signal `sig`": 128 + its number (130 for SIGINT).
pub fn exit_code(sig: i32) -> u8 {
    (128 + sig).clamp(0, 255) as u8
}

/// A signal arrived before anything was measured: everything started was stopped again and
/// no file was written.
#[derive(Debug, thiserror::Error)]
#[error("{}: stopped during start-up, before anything was measured; no files were written", name(*.0))]
pub struct Interrupted(pub i32);
