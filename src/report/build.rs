//! The run file's entries from the attribution's verdicts and ranking: the one place that
//! turns attribution types into the stable JSON structs.

use super::advice::{advice, Machine};
use super::culprit::words;
use super::runfile::{
    ContainerEntry, CpuCount, CpuSteal, CpuTheftEntry, CulpritEntry, ProbeInfo, ProcessEntry,
    ProcessesEntry, ProgramCostEntry, SpikeEntry, StallCulprit, StallEntry, TimelineRecord,
};
use crate::attribution::recent::{RecentKernel, WindowTime};
use crate::attribution::run::RunAttribution;
use crate::attribution::{RankedCulprit, Share, SpikeVerdict, Verdict};
use crate::model::{vector_name, Cpu, Nanos, Spike, ThreadRole, Who};
use crate::probe::{AttachState, AttachStatus, ProbeSummary};

/// `accumulator`, `journaller`, `consumer-3` … by consumer index.
pub fn consumer_key(index: usize) -> String {
    ThreadRole::Consumer(index as u32).display_name()
}

/// A task culprit's container as the run file stores it.
fn container_of(who: &Who) -> Option<ContainerEntry> {
    match who {
        Who::Task {
            container: Some(c), ..
        } => Some(ContainerEntry::of(c)),
        _ => None,
    }
}

/// One culprit of a stall or spike.
pub fn stall_culprit(c: &Share) -> StallCulprit {
    let (name, detail) = words(&c.culprit);
    StallCulprit {
        class: c.culprit.class,
        name,
        detail,
        via: super::culprit::via(c.via.as_deref()),
        measured_ns: c.measured_ns,
        inferred_ns: c.inferred_ns,
        host_ns: c.host_ns,
        episodes: u64::from(c.episodes),
        share: c.share,
        container: container_of(&c.culprit.who),
    }
}

fn culprits(list: &[Share], probes_on: bool) -> Vec<StallCulprit> {
    if probes_on {
        list.iter().map(stall_culprit).collect()
    } else {
        Vec::new()
    }
}

/// A verdict as the run file stores it.
pub fn stall_entry(v: &Verdict, probes_on: bool) -> StallEntry {
    let s = &v.stall;
    StallEntry {
        cpu: s.cpu,
        thread: s.thread.display_name(),
        start_ns: s.start_ns,
        end_ns: s.end_ns,
        duration_ns: s.duration_ns(),
        explained_share: probes_on.then_some(v.explained_share),
        culprits: culprits(&v.culprits, probes_on),
        incomplete: v.incomplete,
        timeline: v.timeline.iter().map(TimelineRecord::of).collect(),
    }
}

/// A spike verdict as the run file stores it.
pub fn spike_entry(v: &SpikeVerdict, probes_on: bool) -> SpikeEntry {
    SpikeEntry {
        consumer: consumer_key(v.spike.consumer as usize),
        producer_cpu: v.producer_cpu,
        consumer_cpu: v.consumer_cpu,
        publish_ns: v.spike.publish_ns,
        receive_ns: v.spike.receive_ns,
        transit_ns: v.spike.transit_ns(),
        producer_stalled_ns: v.producer_stalled_ns,
        consumer_stalled_ns: v.consumer_stalled_ns,
        producer_culprits: culprits(&v.producer_culprits, probes_on),
        consumer_culprits: culprits(&v.consumer_culprits, probes_on),
    }
}

/// Deciding at the end, a spike as the live view shows it until its culprits are decided
/// (`kernel_window_spike`).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelWindowSpike {
    pub entry: SpikeEntry,
    /// Part of the window's records were let go for room.
    pub partial: bool,
    /// The consumer's wait that no record glanced at covers (yet): the kernel's entry and
    /// exit paths, the host, or an episode whose record comes later (a task run whose
    /// closing switch the probes missed is reported at the next switch they see).
    pub uncovered_ns: Nanos,
}

/// Deciding at the end, a spike as the live view shows it until its culprits are decided:
/// the kernel time inside its window on both CPUs, from the records glanced at so far
/// (`attribution::recent`). As the engine does with stalls: an episode on the producer's CPU at the
/// publication held the message until the kernel let that CPU go; what ran on the consumer's
/// CPU from then to the receipt kept the consumer from it.
pub fn kernel_window_spike(
    spike: &Spike,
    (producer_cpu, consumer_cpu): (Cpu, Cpu),
    recent: &RecentKernel,
) -> KernelWindowSpike {
    let (a, b) = (spike.publish_ns, spike.receive_ns.max(spike.publish_ns));
    let transit = b - a;
    let held = recent.held_from(producer_cpu, a, b);
    let producer = recent.window(producer_cpu, a, held);
    let consumer = recent.window(consumer_cpu, held, b);
    let entries = |w: &WindowTime| -> Vec<StallCulprit> {
        w.culprits
            .iter()
            .map(|(culprit, ns)| StallCulprit {
                class: culprit.class,
                name: super::culprit::name(&culprit.who),
                detail: super::culprit::detail(&culprit.who),
                via: String::new(),
                measured_ns: *ns,
                inferred_ns: 0,
                host_ns: 0,
                episodes: 1,
                share: *ns as f64 / transit.max(1) as f64,
                container: container_of(&culprit.who),
            })
            .collect()
    };
    let entry = SpikeEntry {
        consumer: consumer_key(spike.consumer as usize),
        producer_cpu,
        consumer_cpu,
        publish_ns: a,
        receive_ns: b,
        transit_ns: transit,
        producer_stalled_ns: held - a,
        consumer_stalled_ns: consumer.total_ns(),
        producer_culprits: entries(&producer),
        consumer_culprits: entries(&consumer),
    };
    KernelWindowSpike {
        entry,
        partial: producer.partial || consumer.partial,
        uncovered_ns: (b - held).saturating_sub(consumer.total_ns()),
    }
}

/// A run-wide ranking row as the run file stores it, with its advice for `machine`.
pub fn culprit_entry(c: RankedCulprit, machine: &Machine) -> CulpritEntry {
    let (name, detail) = words(&c.culprit);
    let on: Vec<Cpu> = c.cpus.iter().map(|t| t.cpu).collect();
    let advice = advice(&c.culprit, &on, machine);
    let vector = match c.culprit.who {
        Who::OwnIpi { vector, .. } => Some(vector_name(vector).to_string()),
        _ => None,
    };
    let processes = c.processes.map(|p| ProcessesEntry {
        count: p.count,
        more: p.more,
        not_listed: p.count.saturating_sub(p.each.len() as u64),
        listed: p
            .each
            .into_iter()
            .map(|t| ProcessEntry {
                pid: t.pid,
                episodes: t.episodes,
                measured_ns: t.measured_ns,
                inferred_ns: t.inferred_ns,
                longest_ns: t.longest_ns,
            })
            .collect(),
    });
    CulpritEntry {
        who: Some(super::runfile::WhoEntry::of(&c.culprit.who)),
        class: c.culprit.class,
        name,
        detail,
        vector,
        episodes: c.episodes,
        measured_ns: c.measured_ns,
        inferred_ns: c.inferred_ns,
        host_ns: c.host_ns,
        longest_ns: c.longest_ns,
        share: c.share,
        advice,
        cpus: c
            .cpus
            .into_iter()
            .map(|t| CpuTheftEntry {
                cpu: t.cpu,
                measured_ns: t.measured_ns,
                inferred_ns: t.inferred_ns,
                host_ns: t.host_ns,
                episodes: t.episodes,
            })
            .collect(),
        processes,
    }
}

/// The longest `self` theft per CPU, as the run file lists it.
pub fn longest_self(attr: &RunAttribution) -> Vec<super::runfile::CpuLongest> {
    attr.longest_self
        .iter()
        .map(|(&cpu, &ns)| super::runfile::CpuLongest { cpu, ns })
        .collect()
}

/// What the probes attached, recorded and cost, and the steal seen (a run's or a watch's).
pub fn probe_info(attach: &[AttachStatus], p: &ProbeSummary, attr: &RunAttribution) -> ProbeInfo {
    let counts = |v: &[(u32, u64)]| -> Vec<CpuCount> {
        v.iter()
            .map(|&(cpu, count)| CpuCount { cpu, count })
            .collect()
    };
    ProbeInfo {
        unavailable: attach
            .iter()
            .filter(|a| a.state != AttachState::Attached)
            .map(|a| a.tracepoint.clone())
            .collect(),
        events: counts(&p.events),
        drops: counts(&p.drops),
        costs: p
            .costs
            .iter()
            .map(|c| ProgramCostEntry {
                program: c.program.clone(),
                run_count: c.run_count,
                run_time_ns: c.run_time_ns,
            })
            .collect(),
        incomplete_stalls: attr.ranking.incomplete(),
        stats_enabled: p.stats_enabled,
        symbols: p.symbols,
        steal_clock: p.steal_clock,
        steal_note: p.steal_clock_note.clone().unwrap_or_default(),
        steal: attr
            .steal_seen
            .iter()
            .map(|(&cpu, &steal_ns)| CpuSteal { cpu, steal_ns })
            .collect(),
    }
}
