//! The VM step: on a guest, the host's share of the consumer's lost time beside what no kernel
//! event explains, and what a guest can and cannot do about each. The steal clock is the
//! host's own count of time the vCPU was runnable but not running; `hypervisor` is the part of
//! it inside the workload's stalls; `unexplained` is stall time that neither a kernel record
//! nor steal covers (host work the steal clock does not count: exits, the host's interrupts).

use std::io::Write;

use anyhow::Result;

use super::grade::{on_cpu, Check};
use crate::model::{Cpu, CulpritClass, Nanos};
use crate::report::runfile::RunFile;
use crate::units::fmt_ns;

/// A guest's answer to each of the two.
const CAN: &[&str] = &[
    "hypervisor — a guest cannot remove steal; the host's owner can: dedicated vCPUs pinned to physical CPUs that nothing else runs on (isolated on the host), no CPU overcommit; a bare-metal or dedicated-host instance",
    "unexplained — on a guest mostly the host's work that the steal clock does not count (VM exits, the host's own interrupts): a guest can only avoid exits of its own making (timers it does not need: nohz_full, BOOT); the rest is the host's to remove",
];

/// Prints the host's share and the unexplained time on `cpu`, and grades that the host's
/// share was measured (the steal clock read). Both are listed as what remains.
pub fn grade(run: &RunFile, cpu: Cpu, out: &mut dyn Write) -> Result<Vec<Check>> {
    let secs = (run.run.duration_ns as f64 / 1e9).max(1e-3);
    let per_s = |ns: Nanos| fmt_ns((ns as f64 / secs) as Nanos);
    let probes = run.probes.as_ref();
    let steal_clock = probes.is_some_and(|p| p.steal_clock);
    let steal: Nanos = probes
        .map(|p| {
            p.steal
                .iter()
                .filter(|s| s.cpu == cpu)
                .map(|s| s.steal_ns)
                .sum()
        })
        .unwrap_or(0);
    let stalled: Nanos = run
        .stall_summary
        .per_cpu
        .iter()
        .filter(|s| s.cpu == cpu)
        .map(|s| s.total_ns)
        .sum();
    let host = on_cpu(run, cpu, |c| c.class == CulpritClass::Hypervisor);
    let unexplained = on_cpu(run, cpu, |c| c.class == CulpritClass::Unexplained);
    let hypervisor = run
        .config
        .as_ref()
        .and_then(|c| c.hypervisor.clone())
        .unwrap_or_else(|| "a hypervisor".into());
    writeln!(
        out,
        "  the machine is a guest of {hypervisor}: the host can take the vCPU at any moment"
    )?;
    if steal_clock {
        writeln!(
            out,
            "  steal clock of CPU {cpu}: {} over {} ({}/s), the host's own count of time the vCPU waited for a physical CPU",
            fmt_ns(steal),
            fmt_ns(run.run.duration_ns),
            per_s(steal)
        )?;
    }
    writeln!(
        out,
        "  of the consumer's {} of stalls on CPU {cpu}: hypervisor {} in {}× ({}/s) · unexplained {} in {}× ({}/s)",
        fmt_ns(stalled),
        fmt_ns(host.ns),
        host.count,
        per_s(host.ns),
        fmt_ns(unexplained.ns),
        unexplained.count,
        per_s(unexplained.ns)
    )?;
    for line in CAN {
        writeln!(out, "  {line}")?;
    }
    Ok(vec![if steal_clock {
        Check::new(
            true,
            format!("the host's share is measured: the steal clock of CPU {cpu} was read through the run ✓ (it and the unexplained time remain: no guest setting removes them)"),
        )
    } else {
        Check::new(
            false,
            format!(
                "the host's share is not measured on CPU {cpu} ✗ — {}: the host's time cannot be told from unexplained time",
                probes.map_or("the run had no probes".to_string(), |p| p.steal_note.clone())
            ),
        )
    }])
}
