//! Opening, loading and attaching the programs: the rodata set before load (the CPU filter,
//! `hrtimer_wakeup`'s address, the steal clock's offset), the choice of programs this kernel
//! can take, and the failures told apart — missing BTF, lockdown, missing privileges, a
//! verifier rejection (shown with the end of libbpf's log, captured here) — so that each
//! error says what to do.

use std::mem::MaybeUninit;
use std::sync::Mutex;

use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{ErrorKind, Link, OpenObject};

use super::kallsyms::Kallsyms;
use super::rings::{self, RingLayout};
use super::threads::{self, Identity, WHOAMI_SECTION};
use super::{steal, AttachState, AttachStatus, ProbeConfig, ProbeError, Reference, MANDATORY};
use super::{JitterscopeSkel, JitterscopeSkelBuilder, OpenJitterscopeSkel};

/// The reference programs' names begin so (`ProbeConfig::floor`).
pub(super) const FLOOR_PREFIX: &str = "js_floor_";

/// What loading found, sent from the drain thread to `start`.
pub(super) struct Loaded {
    pub(super) attach: Vec<AttachStatus>,
    /// Ok when the steal clock is read, else why not.
    pub(super) steal: Result<i64, String>,
    pub(super) identity: Identity,
    /// How the per-CPU record rings are laid out.
    pub(super) rings: RingLayout,
}

/// libbpf's log lines, kept so that a verifier rejection can show its last lines.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn capture_libbpf_log() {
    libbpf_rs::set_print(Some((
        libbpf_rs::PrintLevel::Debug,
        |level, msg: String| {
            if let Ok(mut log) = LIBBPF_LOG.lock() {
                if level != libbpf_rs::PrintLevel::Debug
                    || msg.contains("verif")
                    || log.len() < 2000
                {
                    log.push(msg.trim_end().to_string());
                }
                let excess = log.len().saturating_sub(4000);
                log.drain(..excess);
            }
        },
    )));
}

fn last_log_lines(n: usize) -> String {
    let log = LIBBPF_LOG.lock().map(|l| l.clone()).unwrap_or_default();
    let start = log.len().saturating_sub(n);
    log[start..].join("\n")
}

/// The kernel lockdown mode when it restricts BPF (`confidentiality`), from the text of
/// /sys/kernel/security/lockdown (`none integrity [confidentiality]`).
pub fn bpf_lockdown(text: &str) -> Option<String> {
    let mode = text.split_whitespace().find(|w| w.starts_with('['))?;
    let mode = mode.trim_matches(|c| c == '[' || c == ']');
    (mode == "confidentiality").then(|| mode.to_string())
}

/// What must hold before loading is tried: the kernel's BTF.
pub fn check_kernel(btf: &std::path::Path) -> Result<(), ProbeError> {
    if btf.exists() {
        Ok(())
    } else {
        Err(ProbeError::NoBtf)
    }
}

/// The kernel refused with EPERM: lockdown when it is on (root cannot lift it), else
/// missing privileges. `lockdown` is the content of /sys/kernel/security/lockdown.
pub fn permission_error(lockdown: Option<&str>) -> ProbeError {
    match lockdown.and_then(bpf_lockdown) {
        Some(mode) => ProbeError::Lockdown { mode },
        None => ProbeError::Permission {
            errno: "EPERM".into(),
        },
    }
}

fn refused() -> ProbeError {
    permission_error(
        crate::platform::input::read_proc(
            "/sys/kernel/security/lockdown",
            crate::platform::input::PROC_FILE,
        )
        .as_deref(),
    )
}

fn classify_load_error(e: &libbpf_rs::Error) -> ProbeError {
    let log = last_log_lines(25);
    // The verifier refuses with EACCES too: its log, not the errno, tells it from privilege.
    let verifier = log.contains("processed") || log.contains("R0") || log.contains("invalid");
    match e.kind() {
        ErrorKind::PermissionDenied if !verifier => refused(),
        _ => {
            if verifier {
                ProbeError::Verifier {
                    cause: e.to_string(),
                    log,
                }
            } else {
                ProbeError::Other {
                    action: "load the BPF programs".into(),
                    cause: format!("{e:#}\n{log}"),
                }
            }
        }
    }
}

/// A libbpf failure while doing `action`.
pub(super) fn other(action: &str) -> impl Fn(libbpf_rs::Error) -> ProbeError + '_ {
    move |e| ProbeError::Other {
        action: action.to_string(),
        cause: format!("{e:#}"),
    }
}

/// The tracepoint a program is attached to, from its section (`tp_btf/sched_switch`).
pub(super) fn tracepoint_of(section: &str) -> &str {
    section.rsplit('/').next().unwrap_or(section)
}

pub(super) type Attached<'obj> = (JitterscopeSkel<'obj>, Vec<Link>, Loaded);

/// Opens the skeleton in `storage`, sets it up for `cfg`, loads it and attaches every program
/// this kernel has; the links keep them attached.
pub(super) fn load_and_attach<'obj>(
    cfg: &ProbeConfig,
    syms: &Kallsyms,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<Attached<'obj>, ProbeError> {
    capture_libbpf_log();
    let btf = Btf::from_vmlinux().map_err(|_| ProbeError::NoBtf)?;
    let mut open = JitterscopeSkelBuilder::default()
        .open(storage)
        .map_err(|e| classify_load_error(&e))?;
    let steal = set_rodata(&mut open, cfg, syms, &btf)?;
    let rings = rings::size(&mut open, cfg.ringbuf_bytes, &cfg.cpus)?;
    if cfg.watch {
        super::watch::size(&mut open, cfg.watch_capacity)?;
    }
    let mut attach = choose_programs(&mut open, &btf, cfg)?;
    let mut skel = open.load().map_err(|e| classify_load_error(&e))?;
    let identity = threads::learn_identity(&mut skel)?;
    if cfg.watch {
        super::watch::learn_namespace(&skel)?;
    }
    let links = attach_programs(&mut skel, &mut attach, cfg.floor)?;
    attach.sort_by(|a, b| a.tracepoint.cmp(&b.tracepoint));
    Ok((
        skel,
        links,
        Loaded {
            attach,
            steal,
            identity,
            rings,
        },
    ))
}

/// The `const volatile` settings, before load: the measured CPUs, `hrtimer_wakeup`'s address
/// and the steal clock. Returns whether the steal clock is read (Ok: its offset) or why not.
fn set_rodata(
    open: &mut OpenJitterscopeSkel,
    cfg: &ProbeConfig,
    syms: &Kallsyms,
    btf: &Btf,
) -> Result<Result<i64, String>, ProbeError> {
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .ok_or(ProbeError::Other {
            action: "set the CPU filter".into(),
            cause: "the BPF object's rodata is not memory-mapped".into(),
        })?;
    for &cpu in &cfg.cpus {
        if (cpu as usize) < rodata.target_cpus.len() * 64 {
            rodata.target_cpus[cpu as usize / 64] |= 1 << (cpu % 64);
        }
    }
    rodata.hrtimer_wakeup_fn = syms.address_of("hrtimer_wakeup").unwrap_or(0);
    rodata.watch_mode = cfg.watch;
    let steal = steal::status(steal::percpu_offsets(btf), steal::host());
    rodata.steal_clock = steal.is_ok();
    rodata.steal_time_from_rq = *steal.as_ref().unwrap_or(&0);
    let preempt = steal::preempt_count_from_rq(btf);
    rodata.preempt_count_known = preempt.is_some();
    rodata.preempt_count_from_rq = preempt.unwrap_or(0);
    Ok(steal)
}

/// The page-fault timing programs (fentry/fexit), which some kernels refuse.
pub(super) fn is_fault_program(section: &str) -> bool {
    section.starts_with("fentry/") || section.starts_with("fexit/")
}

/// Whether a program serves watch mode only (`js_w_*`, the task iterator): left out of runs.
fn watch_only(name: &str, section: &str) -> bool {
    name.starts_with("js_w_") || section.starts_with("iter/")
}

/// Which programs load: not those whose tracepoint (or, for fentry/fexit, kernel function)
/// this kernel lacks (an error when it is mandatory), the test seams only when asked, watch
/// mode's only in a watch. Returns the tracepoints left out.
fn choose_programs(
    open: &mut OpenJitterscopeSkel,
    btf: &Btf,
    cfg: &ProbeConfig,
) -> Result<Vec<AttachStatus>, ProbeError> {
    let (test_seams, watch) = (cfg.test_seams, cfg.watch);
    let mut left_out = Vec::new();
    for mut prog in open.open_object_mut().progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        let name = prog.name().to_string_lossy().into_owned();
        let tp = tracepoint_of(&section).to_string();
        if section == WHOAMI_SECTION {
            continue;
        }
        if section.starts_with("raw_tp/") {
            prog.set_autoload(test_seams);
            continue;
        }
        if name.starts_with(FLOOR_PREFIX) {
            prog.set_autoload(cfg.floor != Reference::Off);
            continue;
        }
        if watch_only(&name, &section) && !watch {
            prog.set_autoload(false);
            continue;
        }
        if section.starts_with("iter/") {
            continue;
        }
        if is_fault_program(&section) && !cfg.faults {
            prog.set_autoload(false);
            continue;
        }
        let present = if section.starts_with("fentry/") || section.starts_with("fexit/") {
            btf.type_by_name::<libbpf_rs::btf::types::Func>(&tp)
                .is_some()
        } else {
            btf.type_by_name::<libbpf_rs::btf::types::Typedef>(&format!("btf_trace_{tp}"))
                .is_some()
        };
        if !present {
            if MANDATORY.contains(&tp.as_str()) {
                return Err(ProbeError::Attach {
                    tracepoint: tp,
                    cause: "this kernel has no such tracepoint".into(),
                });
            }
            prog.set_autoload(false);
            left_out.push(AttachStatus {
                tracepoint: tp,
                state: AttachState::Unavailable("not in this kernel".into()),
            });
        }
    }
    Ok(left_out)
}

/// Whether the program named so is attached in the round `first` (the first of two): the
/// reference programs go in the first round only when they are to run before the probes.
fn attached_in_round(name: &str, first: bool, floor: Reference) -> bool {
    let reference = name.starts_with(FLOOR_PREFIX);
    first == (reference && floor == Reference::BeforeProbes)
}

/// Attaches every loaded tracing program, noting each in `attach`; a mandatory one that fails
/// is an error. Programs on one tracepoint run in attach order: the reference programs are
/// attached in a round of their own before the probes' when `floor` says so.
fn attach_programs(
    skel: &mut JitterscopeSkel,
    attach: &mut Vec<AttachStatus>,
    floor: Reference,
) -> Result<Vec<Link>, ProbeError> {
    let mut links = Vec::new();
    for first in [true, false] {
        attach_round(skel, attach, &mut links, |name| {
            attached_in_round(name, first, floor)
        })?;
    }
    Ok(links)
}

/// One round of `attach_programs`: the loaded tracing programs whose names `this_round` takes.
fn attach_round(
    skel: &mut JitterscopeSkel,
    attach: &mut Vec<AttachStatus>,
    links: &mut Vec<Link>,
    this_round: impl Fn(&str) -> bool,
) -> Result<(), ProbeError> {
    for prog in skel.object().progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        if !prog.autoload() || section.starts_with("raw_tp") || section.starts_with("iter/") {
            continue;
        }
        let name = prog.name().to_string_lossy().into_owned();
        if !this_round(&name) {
            continue;
        }
        let tp = tracepoint_of(&section).to_string();
        // The reference programs are not probes: attached when asked for, not reported.
        let reference = name.starts_with(FLOOR_PREFIX);
        match prog.attach() {
            Ok(link) if reference => links.push(link),
            Err(e) if reference => {
                return Err(ProbeError::Attach {
                    tracepoint: format!("{tp} (the reference program {:?})", prog.name()),
                    cause: format!("{e:#}"),
                })
            }
            Ok(link) => {
                links.push(link);
                attach.push(AttachStatus {
                    tracepoint: tp,
                    state: AttachState::Attached,
                });
            }
            Err(e) if MANDATORY.contains(&tp.as_str()) => {
                return Err(if e.kind() == ErrorKind::PermissionDenied {
                    refused()
                } else {
                    ProbeError::Attach {
                        tracepoint: tp,
                        cause: format!("{e:#}"),
                    }
                })
            }
            Err(e) => attach.push(AttachStatus {
                tracepoint: tp,
                state: AttachState::Unavailable(format!("{e:#}")),
            }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_programs_are_attached_before_the_probes_only_when_asked() {
        let probe = "js_local_timer_entry";
        let reference = "js_floor_timer_clock";
        let round = |name, floor| {
            [true, false]
                .into_iter()
                .position(|first| attached_in_round(name, first, floor))
        };
        // Every program is attached in exactly one round.
        for floor in [
            Reference::Off,
            Reference::AfterProbes,
            Reference::BeforeProbes,
        ] {
            assert_eq!(round(probe, floor), Some(1), "{floor:?}");
        }
        assert_eq!(round(reference, Reference::AfterProbes), Some(1));
        assert_eq!(round(reference, Reference::BeforeProbes), Some(0));
    }

    #[test]
    fn missing_btf_lockdown_and_privileges_are_told_apart() {
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let missing = here.join("no-such-btf");
        let e = check_kernel(&missing).unwrap_err().to_string();
        assert!(e.contains("this kernel has no BTF"), "{e}");
        assert!(e.contains("CONFIG_DEBUG_INFO_BTF=y"), "{e}");
        assert!(check_kernel(here).is_ok());
        let e = permission_error(Some("none integrity [confidentiality]\n")).to_string();
        assert!(e.contains("locked down (confidentiality)"), "{e}");
        assert!(e.contains("--no-probes"), "{e}");
        // Integrity mode keeps BPF tracing; EPERM then means privileges.
        for text in [
            Some("none [integrity] confidentiality"),
            Some("[none] integrity confidentiality"),
            None,
        ] {
            let e = permission_error(text).to_string();
            assert!(e.contains("CAP_BPF+CAP_PERFMON"), "{text:?}: {e}");
        }
    }
}
