//! One jitterscope per measured CPU. Two runs spinning on the same CPU measure each other,
//! so a run claims its CPUs first: one listening Unix socket per CPU in the abstract
//! namespace (`@jitterscope/cpu/N`). The kernel releases it when the process ends, however
//! it ends (SIGKILL included), nothing is written to the filesystem, and a second run that
//! finds the name taken connects to it and learns the holder's pid from SO_PEERCRED.
//! Abstract socket names are per network namespace: runs in different network namespaces
//! (containers) do not see each other's claims.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::model::Cpu;
use crate::platform::input;

/// The CPUs this process holds, released on drop.
#[derive(Debug)]
pub struct CpuClaim {
    _sockets: Vec<OwnedFd>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("CPU {cpu} is already measured by another jitterscope (pid {pid}{command}); two runs on one CPU measure each other — wait for it to end or choose other CPUs")]
    InUse { cpu: Cpu, pid: i32, command: String },
    #[error("cannot claim CPU {cpu} for this run: {source}")]
    Socket { cpu: Cpu, source: std::io::Error },
}

fn address(cpu: Cpu) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // A leading NUL byte puts the name in the abstract namespace.
    let name = format!("\0jitterscope/cpu/{cpu}");
    for (dst, src) in addr.sun_path.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + name.len();
    (addr, len as libc::socklen_t)
}

fn stream_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The pid holding `cpu`'s claim, asked through the socket itself.
fn holder(cpu: Cpu) -> Option<i32> {
    let s = stream_socket().ok()?;
    let (addr, len) = address(cpu);
    // SAFETY: addr/len describe a valid sockaddr_un.
    let rc = unsafe {
        libc::connect(
            s.as_raw_fd(),
            &addr as *const libc::sockaddr_un as *const libc::sockaddr,
            len,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: ucred is plain data; getsockopt fills at most `size` bytes.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut size = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut size,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

fn command_of(pid: i32) -> String {
    // A command line is at most the kernel's argument room (ARG_MAX, 2 MiB by default).
    let raw = std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|f| input::read_bounded(f, input::PROC_TABLE).ok())
        .unwrap_or_default();
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    if words.is_empty() {
        String::new()
    } else {
        format!(": {}", words.join(" "))
    }
}

impl CpuClaim {
    /// Claims every CPU in `cpus`, or none: the first CPU already held names its holder.
    pub fn acquire(cpus: &[Cpu]) -> Result<CpuClaim, ClaimError> {
        let mut sockets = Vec::new();
        for &cpu in cpus {
            let socket_err = |source| ClaimError::Socket { cpu, source };
            let s = stream_socket().map_err(socket_err)?;
            let (addr, len) = address(cpu);
            // SAFETY: addr/len describe a valid sockaddr_un.
            let rc = unsafe {
                libc::bind(
                    s.as_raw_fd(),
                    &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                    len,
                )
            };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EADDRINUSE) {
                    let pid = holder(cpu).unwrap_or(0);
                    return Err(ClaimError::InUse {
                        cpu,
                        pid,
                        command: if pid > 0 {
                            command_of(pid)
                        } else {
                            String::new()
                        },
                    });
                }
                return Err(socket_err(e));
            }
            // SAFETY: plain syscall on our socket. Listening makes the holder reachable.
            if unsafe { libc::listen(s.as_raw_fd(), 8) } != 0 {
                return Err(socket_err(std::io::Error::last_os_error()));
            }
            sockets.push(s);
        }
        Ok(CpuClaim { _sockets: sockets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_names_the_holder_and_a_dropped_claim_is_free_again() {
        // CPU numbers far above any real machine's, so a real run is never disturbed.
        let first = CpuClaim::acquire(&[60_001, 60_002]).unwrap();
        match CpuClaim::acquire(&[60_003, 60_002]) {
            Err(ClaimError::InUse { cpu, pid, .. }) => {
                assert_eq!(cpu, 60_002);
                assert_eq!(pid, std::process::id() as i32);
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        // All or nothing: the refused claim released 60003 again.
        drop(CpuClaim::acquire(&[60_003]).unwrap());
        drop(first);
        drop(CpuClaim::acquire(&[60_001, 60_002]).unwrap());
    }
}
