//! `jitterscope tune`: the chosen tuning actions applied for the measured CPUs, held for a
//! while (or until a signal), then restored — every change through the restore journal.

use std::io::Write;

use anyhow::Result;

use super::actions::{self, Outcome};
use super::tuning::{restore_leftovers, Tuner};
use crate::model::{Cpu, Nanos};
use crate::platform::clock::monotonic_ns;
use crate::units::fmt_ns;

/// What to tune, checked: the CPUs to clear, the ones the rest of the system keeps, and the
/// actions asked for (at least one).
#[derive(Debug, Clone)]
pub struct TuneRequest {
    pub cpus: Vec<Cpu>,
    /// The CPUs as the user wrote them, for messages.
    pub cpus_text: String,
    /// Where IRQs, unbound work and shielded tasks go: every other online CPU (not empty).
    pub others: Vec<Cpu>,
    pub irqs: bool,
    pub kworkers: bool,
    pub shield: bool,
    pub stat_interval_s: Option<u32>,
    pub governor: Option<String>,
    pub hold_ns: Nanos,
}

/// Applies the request, holds it for `hold_ns` or until a signal, restores it.
pub fn apply_and_hold(req: &TuneRequest, out: &mut dyn Write) -> Result<()> {
    restore_leftovers();
    let mut t = Tuner::new();
    apply(&mut t, req, out)?;
    writeln!(
        out,
        "holding {} changes for {} (Ctrl-C restores now; after a kill: jitterscope restore)",
        t.changes().len(),
        fmt_ns(req.hold_ns)
    )?;
    // Holding wakes this thread ten times a second: on the CPUs it cleared, that would be
    // the very noise it removed.
    let _ = crate::platform::affinity::set_current_thread_cpus(&req.others);
    hold(req.hold_ns);
    restore(t, out)
}

/// Each asked-for action in turn, with what it did and what it could not do.
fn apply(t: &mut Tuner, req: &TuneRequest, out: &mut dyn Write) -> Result<()> {
    if req.irqs {
        writeln!(out, "IRQs:")?;
        list(actions::move_irqs(t, &req.others), out)?;
    }
    if req.kworkers {
        writeln!(out, "{}", actions::workqueue_cpumask(t, &req.others)?)?;
    }
    if let Some(secs) = req.stat_interval_s {
        writeln!(out, "{}", actions::stat_interval(t, secs)?)?;
    }
    if let Some(g) = &req.governor {
        writeln!(out, "governor:")?;
        list(actions::governor(t, &req.cpus, g), out)?;
    }
    if req.shield {
        writeln!(out, "shield:")?;
        let o = actions::shield(t, &req.others)
            .map_err(|e| anyhow::anyhow!("cannot shield CPU {}: {e}", req.cpus_text))?;
        list(o, out)?;
    }
    Ok(())
}

fn list(o: Outcome, out: &mut dyn Write) -> Result<()> {
    for d in o.done {
        writeln!(out, "  {d}")?;
    }
    for r in o.refused {
        writeln!(out, "  not done: {r}")?;
    }
    Ok(())
}

/// Sleeps until `hold_ns` has passed or a signal asked to stop.
fn hold(hold_ns: Nanos) {
    let end = monotonic_ns() + hold_ns;
    while monotonic_ns() < end && crate::signals::received().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Puts everything back; a setting that cannot be restored is a WARNING.
fn restore(mut t: Tuner, out: &mut dyn Write) -> Result<()> {
    let n = t.changes().len();
    let failed = t.restore();
    for f in &failed {
        eprintln!("WARNING: {f}");
    }
    writeln!(out, "restored {} changes", n - failed.len().min(n))?;
    Ok(())
}
