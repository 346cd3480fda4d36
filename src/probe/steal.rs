//! Whether the probes can read a KVM steal clock on this machine, and if not, why: the
//! kernel must have the per-CPU `steal_time` variable (a KVM guest kernel), and a KVM host
//! must keep it up to date (it offers steal time in its CPUID feature leaf; on bare metal or
//! another hypervisor the variable stays 0).
//!
//! The probes cannot name `steal_time` as a `__ksym`: the verifier finds a ksym's address in
//! kallsyms, which lists data symbols only with CONFIG_KALLSYMS_ALL (not set on the kernels
//! this runs on: "ldimm64 failed to find the address for kernel symbol 'steal_time'"). They
//! reach it from the CPU's runqueue instead, which they can find: both are per-CPU variables,
//! so on every CPU they lie the same distance apart, and the kernel's BTF gives each one's
//! offset in the per-CPU section.

use libbpf_rs::btf::types::{DataSec, Var};
use libbpf_rs::btf::Btf;

/// The hypervisor this machine runs under, as far as the steal clock is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// No hypervisor (CPUID's hypervisor bit is clear), or not x86.
    BareMetal,
    /// A hypervisor that does not present itself as KVM.
    OtherHypervisor,
    /// KVM; whether it offers steal time (KVM_FEATURE_STEAL_TIME).
    Kvm { steal_time: bool },
}

/// Offsets of the per-CPU variables `steal_time` and `runqueues` in the per-CPU section, as
/// the kernel's BTF gives them (None when absent).
pub fn percpu_offsets(btf: &Btf) -> (Option<u32>, Option<u32>) {
    (
        percpu_offset(btf, "steal_time"),
        percpu_offset(btf, "runqueues"),
    )
}

/// The offset of per-CPU variable `name` in the per-CPU section, as the kernel's BTF gives
/// it (None when absent).
pub fn percpu_offset(btf: &Btf, name: &str) -> Option<u32> {
    let sec = btf.type_by_name::<DataSec>(".data..percpu")?;
    let found = sec
        .iter()
        .find(|v| {
            btf.type_by_id::<Var>(v.ty)
                .and_then(|var| var.name())
                .is_some_and(|n| n == name)
        })
        .map(|v| v.offset);
    found
}

/// `&__preempt_count - &runqueues`, what the probes add to a runqueue's address to read the
/// CPU's preempt count (x86 keeps it in a per-CPU variable); None when the BTF lacks either.
pub fn preempt_count_from_rq(btf: &Btf) -> Option<i64> {
    let count = percpu_offset(btf, "__preempt_count")?;
    let runqueues = percpu_offset(btf, "runqueues")?;
    Some(count as i64 - runqueues as i64)
}

/// `&steal_time - &runqueues` (what the probes add to a runqueue's address) when the steal
/// clock can be read; else the one-line reason.
pub fn status(offsets: (Option<u32>, Option<u32>), host: Host) -> Result<i64, String> {
    let (Some(steal), Some(runqueues)) = offsets else {
        return Err(if offsets.0.is_none() {
            "no KVM steal clock (symbol steal_time absent: not a KVM guest)".into()
        } else {
            "no KVM steal clock (runqueues absent from the kernel's BTF: cannot locate steal_time)"
                .into()
        });
    };
    match host {
        Host::Kvm { steal_time: true } => Ok(steal as i64 - runqueues as i64),
        Host::Kvm { steal_time: false } => {
            Err("no KVM steal clock (the KVM host does not offer steal time)".into())
        }
        Host::OtherHypervisor => Err(
            "no KVM steal clock (the hypervisor is not KVM: steal_time is never updated)".into(),
        ),
        Host::BareMetal => {
            Err("no KVM steal clock (not a virtual machine: no host can take the CPU)".into())
        }
    }
}

/// What CPUID says, the way the kernel finds KVM (`kvm_cpuid_base`): the signature in one of
/// the hypervisor leaves, then the feature bits in the next leaf.
#[cfg(target_arch = "x86_64")]
pub fn host() -> Host {
    use std::arch::x86_64::__cpuid;
    const HYPERVISOR_BIT: u32 = 1 << 31; // CPUID.1:ECX
    const KVM_FEATURE_STEAL_TIME: u32 = 1 << 5;
    if __cpuid(1).ecx & HYPERVISOR_BIT == 0 {
        return Host::BareMetal;
    }
    for base in (0x4000_0000u32..0x4001_0000).step_by(0x100) {
        let leaf = __cpuid(base);
        let mut signature = [0u8; 12];
        signature[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
        signature[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
        signature[8..].copy_from_slice(&leaf.edx.to_le_bytes());
        if &signature == b"KVMKVMKVM\0\0\0" {
            let features = __cpuid(base + 1).eax;
            return Host::Kvm {
                steal_time: features & KVM_FEATURE_STEAL_TIME != 0,
            };
        }
    }
    Host::OtherHypervisor
}

#[cfg(not(target_arch = "x86_64"))]
pub fn host() -> Host {
    Host::BareMetal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_missing_piece_has_its_own_reason() {
        let both = (Some(0x2_0000), Some(0x3_0040));
        assert_eq!(status(both, Host::Kvm { steal_time: true }), Ok(-0x1_0040));
        let why = |s: bool, h: Host| status(if s { both } else { (None, both.1) }, h).unwrap_err();
        assert_eq!(
            why(false, Host::Kvm { steal_time: true }),
            "no KVM steal clock (symbol steal_time absent: not a KVM guest)"
        );
        assert!(status((Some(8), None), Host::Kvm { steal_time: true })
            .unwrap_err()
            .contains("runqueues absent"));
        assert!(why(true, Host::Kvm { steal_time: false }).contains("does not offer"));
        assert!(why(true, Host::OtherHypervisor).contains("not KVM"));
        assert!(why(true, Host::BareMetal).contains("not a virtual machine"));
        for h in [Host::BareMetal, Host::OtherHypervisor] {
            assert!(why(true, h).starts_with("no KVM steal clock ("));
            assert!(!why(true, h).contains('\n'));
        }
    }
}
