//! The engine. Records arrive per CPU with delay (the ring buffer is drained every tens of
//! milliseconds, stalls come through their own queue), so stalls wait until the watermark
//! passes them; records older than the retention window are dropped, so memory stays
//! constant however long the run.
//!
//! Rules:
//! - A stall `[s, e]` on CPU c is explained by the records on c that overlap it.
//! - Nested time is counted once, to the innermost cause (osnoise's net durations): at each
//!   instant the covering record of the deepest level wins — NMI over hard IRQ, tick and IPI,
//!   over softirq, over task level (kworker, kthread, task, self); equal levels go to the
//!   later start. So an IRQ inside a kworker's run gets its own time and the kworker the rest.
//! - `explained_share` = covered time / stall time; the rest is `unexplained` (no kernel
//!   event: hypervisor preemption, SMI or hardware).
//! - A frequency change (instantaneous) on c within the stall, or within `freq_lookback_ns`
//!   before it, is listed as a culprit with 0 ns and the gap before the stall; it takes no
//!   time from the other culprits or from the unexplained remainder.
//! - Entry and exit paths: the kernel's interrupt entry/exit and the scheduler's switch code
//!   run just outside the records (a sched episode starts at `sched_switch`, after the
//!   interrupt and `schedule()` that led there). An uncovered piece of a stall no longer than
//!   `edge_ns` that touches a record's start or end is credited to that record; longer
//!   uncovered pieces, and stalls with no record at all, stay `unexplained`.
//! - A reschedule IPI that is followed at once (within `edge_ns`) by a task-level run is
//!   the wake-up of that run: its time goes to the task it woke (kworker, task…), with
//!   `via` saying so, since that task is what the IPI was for.
//! - A stall overlapping a window of lost records on its CPU is `incomplete`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::model::{
    Cause, CauseKind, Cpu, CulpritClass, Interruption, Nanos, Spike, Stall, StealSample,
};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long records are kept behind the watermark (covers the longest stall).
    pub retention_ns: Nanos,
    pub freq_lookback_ns: Nanos,
    /// How long before a kworker run a queue_work may have caused it.
    pub cause_lookback_ns: Nanos,
    /// Longest uncovered piece next to a record that counts as that record's entry/exit.
    pub edge_ns: Nanos,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            retention_ns: 1_000_000_000,
            freq_lookback_ns: 10_000_000,
            cause_lookback_ns: 50_000_000,
            edge_ns: 20_000,
        }
    }
}

/// One culprit's part of a stall.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub class: CulpritClass,
    pub name: String,
    pub detail: String,
    /// Who queued the work or sent the IPI, when the probes saw it.
    pub via: String,
    pub ns: Nanos,
    pub share: f64,
}

/// The explanation of one stall.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub stall: Stall,
    /// Longest first; the unexplained remainder last.
    pub culprits: Vec<Share>,
    pub explained_share: f64,
    pub incomplete: bool,
    /// The records that overlapped the stall (for timelines and traces).
    pub timeline: Vec<Interruption>,
}

impl Verdict {
    pub fn unexplained_ns(&self) -> Nanos {
        self.culprits
            .iter()
            .filter(|c| c.class == CulpritClass::Unexplained)
            .map(|c| c.ns)
            .sum()
    }
}

/// The explanation of one message spike: the stalls of the producer's and the consumer's
/// CPUs inside `[publish, receive]`, each culprit weighted by how much of its stall fell in
/// the window.
#[derive(Debug, Clone, PartialEq)]
pub struct SpikeVerdict {
    pub spike: Spike,
    pub producer_cpu: Cpu,
    pub consumer_cpu: Cpu,
    /// Stalled time inside the window, per side.
    pub producer_stalled_ns: Nanos,
    pub consumer_stalled_ns: Nanos,
    /// Longest first; `share` is of the transit time.
    pub culprits: Vec<Share>,
}

pub const UNEXPLAINED_NAME: &str = "no kernel event";
pub const UNEXPLAINED_DETAIL: &str = "hypervisor preemption, SMI or hardware";
pub const LOST_NAME: &str = "kernel records lost";
pub const LOST_DETAIL: &str = "the BPF ring buffer was full; cause unknown";

fn level(c: CulpritClass) -> u8 {
    match c {
        CulpritClass::Nmi => 4,
        CulpritClass::Irq | CulpritClass::Ipi | CulpritClass::TimerTick => 3,
        CulpritClass::Softirq => 2,
        _ => 1,
    }
}

#[derive(Default)]
struct CpuRecords {
    /// Interval records sorted by start (they arrive nearly in order: inserts go near the back).
    records: VecDeque<Interruption>,
    /// The longest record held: how far before a stall a record can start and still reach it.
    longest_ns: Nanos,
    freq: VecDeque<Interruption>,
    causes: VecDeque<Cause>,
    lost: VecDeque<(Nanos, Nanos)>,
    /// Steal-clock growth windows, oldest first, with the steal not yet given to a stall.
    steal: VecDeque<(StealSample, Nanos)>,
}

#[derive(Default)]
pub struct Engine {
    cfg: EngineConfig,
    cpus: HashMap<Cpu, CpuRecords>,
    /// Undecided stalls by end time.
    pending: BTreeMap<(Nanos, u64), Stall>,
    seq: u64,
    /// Decided stalls (without timelines) still inside the retention window, per CPU, for
    /// the spikes that overlap them.
    recent: HashMap<Cpu, VecDeque<Verdict>>,
    /// Undecided spikes by receive time, with (producer CPU, consumer CPU).
    spikes: BTreeMap<(Nanos, u64), (Spike, Cpu, Cpu)>,
    decided_spikes: Vec<SpikeVerdict>,
    /// Verdicts of stalls shorter than this carry no timeline (only the worst stalls are
    /// kept with theirs; copying records for every stall is the engine's largest cost).
    timeline_from_ns: Nanos,
}

impl Engine {
    pub fn new(cfg: EngineConfig) -> Self {
        Engine {
            cfg,
            ..Default::default()
        }
    }

    pub fn push_stall(&mut self, s: Stall) {
        self.seq += 1;
        self.pending.insert((s.end_ns, self.seq), s);
    }

    pub fn push_interruption(&mut self, i: Interruption) {
        let c = self.cpus.entry(i.cpu).or_default();
        if i.class == CulpritClass::FreqChange {
            c.freq.push_back(i);
        } else {
            c.longest_ns = c.longest_ns.max(i.duration_ns());
            let at = c.records.partition_point(|r| r.start_ns <= i.start_ns);
            c.records.insert(at, i);
        }
    }

    pub fn push_cause(&mut self, cause: Cause) {
        self.cpus
            .entry(cause.target_cpu)
            .or_default()
            .causes
            .push_back(cause);
    }

    /// The host kept `s.cpu` off its physical CPU for `s.steal_ns` within `[from, to]`.
    pub fn push_steal(&mut self, s: StealSample) {
        self.cpus
            .entry(s.cpu)
            .or_default()
            .steal
            .push_back((s, s.steal_ns));
    }

    /// Only stalls at least this long get their records copied into `Verdict::timeline`.
    pub fn set_timeline_from(&mut self, ns: Nanos) {
        self.timeline_from_ns = ns;
    }

    /// A message spike between a producer on `producer_cpu` and a consumer on `consumer_cpu`.
    pub fn push_spike(&mut self, spike: Spike, producer_cpu: Cpu, consumer_cpu: Cpu) {
        self.seq += 1;
        self.spikes.insert(
            (spike.receive_ns, self.seq),
            (spike, producer_cpu, consumer_cpu),
        );
    }

    /// Spike verdicts decided so far (by `advance`/`finish`), handed over once.
    pub fn take_spikes(&mut self) -> Vec<SpikeVerdict> {
        std::mem::take(&mut self.decided_spikes)
    }

    /// Records of `cpu` were lost somewhere in `[start, end]`.
    pub fn mark_lost(&mut self, cpu: Cpu, start_ns: Nanos, end_ns: Nanos) {
        self.cpus
            .entry(cpu)
            .or_default()
            .lost
            .push_back((start_ns, end_ns));
    }

    /// Records held now (for the bounded-memory check).
    pub fn retained(&self) -> usize {
        self.cpus
            .values()
            .map(|c| c.records.len() + c.freq.len() + c.causes.len() + c.lost.len())
            .sum::<usize>()
            + self.pending.len()
            + self.recent.values().map(|r| r.len()).sum::<usize>()
            + self.spikes.len()
    }

    /// Decides every stall that ended before `watermark` (all records that can overlap it
    /// have arrived), then drops records too old to matter.
    pub fn advance(&mut self, watermark: Nanos) -> Vec<Verdict> {
        let mut out = Vec::new();
        while let Some((&(end, _), _)) = self.pending.first_key_value() {
            if end > watermark {
                break;
            }
            if let Some((_, s)) = self.pending.pop_first() {
                let mut v = self.verdict(&s);
                let timeline = if s.duration_ns() >= self.timeline_from_ns {
                    std::mem::take(&mut v.timeline)
                } else {
                    v.timeline = Vec::new();
                    Vec::new()
                };
                self.recent.entry(s.cpu).or_default().push_back(v.clone());
                v.timeline = timeline;
                out.push(v);
            }
        }
        while let Some((&(receive, _), _)) = self.spikes.first_key_value() {
            if receive > watermark {
                break;
            }
            if let Some((_, (spike, p, c))) = self.spikes.pop_first() {
                let v = self.spike_verdict(spike, p, c);
                self.decided_spikes.push(v);
            }
        }
        let horizon = watermark.saturating_sub(self.cfg.retention_ns);
        let oldest_pending = self
            .pending
            .values()
            .map(|s| s.start_ns)
            .min()
            .unwrap_or(u64::MAX);
        let keep_from = horizon.min(oldest_pending.saturating_sub(self.cfg.freq_lookback_ns));
        for r in self.recent.values_mut() {
            while r.front().is_some_and(|v| v.stall.end_ns < keep_from) {
                r.pop_front();
            }
            give_back(r);
        }
        for c in self.cpus.values_mut() {
            // Sorted by start: drop from the front; a long record there holds back shorter
            // ones behind it for at most its own length.
            while c.records.front().is_some_and(|r| r.end_ns < keep_from) {
                c.records.pop_front();
            }
            c.longest_ns = c.records.iter().map(|r| r.duration_ns()).max().unwrap_or(0);
            c.freq
                .retain(|r| r.start_ns >= keep_from.saturating_sub(self.cfg.freq_lookback_ns));
            c.causes
                .retain(|r| r.at_ns >= keep_from.saturating_sub(self.cfg.cause_lookback_ns));
            c.lost.retain(|l| l.1 >= keep_from);
            give_back(&mut c.records);
            give_back(&mut c.causes);
        }
        out
    }

    /// Decides everything still pending (end of run).
    pub fn finish(&mut self) -> Vec<Verdict> {
        self.advance(u64::MAX)
    }

    /// The verdict for one stall, from the records held now.
    pub fn verdict(&self, s: &Stall) -> Verdict {
        let (start, end) = (s.start_ns, s.end_ns.max(s.start_ns));
        let total = end - start;
        let empty = CpuRecords::default();
        let c = self.cpus.get(&s.cpu).unwrap_or(&empty);
        // Records starting before the stall ends, back to the longest record's reach.
        let upto = c.records.partition_point(|r| r.start_ns < end);
        let from = c
            .records
            .partition_point(|r| r.start_ns < start.saturating_sub(c.longest_ns));
        let mut overlapping: Vec<&Interruption> = c
            .records
            .range(from..upto)
            .filter(|r| r.end_ns > start)
            .collect();
        overlapping.sort_by_key(|r| (r.start_ns, r.end_ns));

        // A reschedule IPI immediately followed by a task-level run was that run's wake-up
        // (`overlapping` is sorted by start: the first such run from the IPI's end on).
        let woke: Vec<Option<usize>> = overlapping
            .iter()
            .map(|r| {
                if r.class != CulpritClass::Ipi || r.name != "reschedule" {
                    return None;
                }
                let from = overlapping.partition_point(|t| t.start_ns < r.end_ns);
                overlapping[from..]
                    .iter()
                    .take_while(|t| t.start_ns - r.end_ns <= self.cfg.edge_ns)
                    .position(|t| level(t.class) == 1)
                    .map(|i| from + i)
            })
            .collect();
        let mut woken = vec![false; overlapping.len()];
        for &t in woke.iter().flatten() {
            woken[t] = true;
        }

        // Sweep the elementary segments between all boundaries inside the stall. The covering
        // record of each segment is the top of a heap ordered like the rule (deepest level,
        // then latest start, then latest in sort order); records that ended before the
        // segment are dropped lazily from the top. O(k log k) in the records overlapping.
        let mut cuts: Vec<Nanos> = vec![start, end];
        // Where an uncovered piece touching a record's end or start is credited.
        let mut ends_at: HashMap<Nanos, usize> = HashMap::new();
        let mut starts_at: HashMap<Nanos, usize> = HashMap::new();
        for (i, r) in overlapping.iter().enumerate() {
            let (rs, re) = (r.start_ns.clamp(start, end), r.end_ns.clamp(start, end));
            cuts.push(rs);
            cuts.push(re);
            ends_at.entry(re).or_insert(i);
            starts_at.entry(rs).or_insert(i);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut active: std::collections::BinaryHeap<(u8, Nanos, usize)> =
            std::collections::BinaryHeap::new();
        let mut next = 0;
        let mut by_culprit: Vec<(usize, Nanos)> = Vec::new();
        let mut culprit_at: HashMap<(CulpritClass, &str, &str), usize> = HashMap::new();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            while next < overlapping.len() && overlapping[next].start_ns <= a {
                let r = overlapping[next];
                active.push((level(r.class), r.start_ns, next));
                next += 1;
            }
            while active
                .peek()
                .is_some_and(|&(_, _, i)| overlapping[i].end_ns < b)
            {
                active.pop();
            }
            let winner = active.peek().map(|&(_, _, i)| i).or_else(|| {
                // Uncovered: a short piece touching a record is its entry or exit path.
                if b - a > self.cfg.edge_ns {
                    return None;
                }
                ends_at.get(&a).or_else(|| starts_at.get(&b)).copied()
            });
            let winner = winner.map(|i| woke[i].unwrap_or(i));
            if let Some(idx) = winner {
                let r = overlapping[idx];
                let key = (r.class, r.name.as_str(), r.detail.as_str());
                match culprit_at.get(&key) {
                    Some(&at) => by_culprit[at].1 += b - a,
                    None => {
                        culprit_at.insert(key, by_culprit.len());
                        by_culprit.push((idx, b - a));
                    }
                }
            }
        }
        let share = |ns: Nanos| {
            if total == 0 {
                0.0
            } else {
                ns as f64 / total as f64
            }
        };
        let mut culprits: Vec<Share> = by_culprit
            .iter()
            .map(|&(idx, ns)| {
                let r = overlapping[idx];
                let mut via = self.via(c, r);
                if woken[idx] {
                    if !via.is_empty() {
                        via.push_str("; ");
                    }
                    via.push_str("woken by a reschedule IPI (included)");
                }
                Share {
                    class: r.class,
                    name: r.name.clone(),
                    detail: r.detail.clone(),
                    via,
                    ns,
                    share: share(ns),
                }
            })
            .collect();
        culprits.sort_by_key(|c| std::cmp::Reverse(c.ns));
        let explained: Nanos = culprits.iter().map(|c| c.ns).sum();

        for f in c
            .freq
            .iter()
            .filter(|f| f.start_ns <= end && f.start_ns + self.cfg.freq_lookback_ns >= start)
        {
            let before = start.saturating_sub(f.start_ns);
            let detail = if before > 0 {
                format!(
                    "{}, {} before the stall",
                    f.detail,
                    crate::report::units::fmt_ns(before)
                )
            } else {
                f.detail.clone()
            };
            culprits.push(Share {
                class: CulpritClass::FreqChange,
                name: f.name.clone(),
                detail,
                via: String::new(),
                ns: 0,
                share: 0.0,
            });
        }
        let rest = total.saturating_sub(explained);
        let incomplete = c.lost.iter().any(|&(a, b)| a <= end && b >= start);
        if rest > 0 {
            // With records lost in the window, "no kernel event" cannot be claimed: the
            // remainder's cause is unknown.
            let (class, name, detail) = if incomplete {
                (CulpritClass::Lost, LOST_NAME, LOST_DETAIL)
            } else {
                (
                    CulpritClass::Unexplained,
                    UNEXPLAINED_NAME,
                    UNEXPLAINED_DETAIL,
                )
            };
            culprits.push(Share {
                class,
                name: name.into(),
                detail: detail.into(),
                via: String::new(),
                ns: rest,
                share: share(rest),
            });
        }
        Verdict {
            stall: *s,
            culprits,
            explained_share: share(explained),
            incomplete,
            // Copying records is the engine's largest cost: only stalls long enough to be
            // kept carry them.
            timeline: if total >= self.timeline_from_ns {
                timeline_of(&overlapping, start, end)
            } else {
                Vec::new()
            },
        }
    }

    /// "queued by comm[pid] on CPU n" for a kworker whose work function was queued shortly
    /// before it ran; "sent by …" for an IPI.
    fn spike_verdict(&self, spike: Spike, producer_cpu: Cpu, consumer_cpu: Cpu) -> SpikeVerdict {
        let (a, b) = (spike.publish_ns, spike.receive_ns);
        let transit = spike.transit_ns();
        let mut culprits: Vec<Share> = Vec::new();
        let mut stalled = [0u64; 2];
        let mut cpus = vec![(0, producer_cpu), (1, consumer_cpu)];
        if producer_cpu == consumer_cpu {
            cpus.truncate(1);
        }
        let overlaps = |st: &Stall| st.start_ns < b && st.end_ns > a && st.end_ns > st.start_ns;
        for (side, cpu) in cpus {
            // Decided stalls are held in end order: skip those that ended before the spike.
            // Undecided ones get a verdict only when they overlap it.
            let recent = self.recent.get(&cpu);
            let from = recent.map_or(0, |r| r.partition_point(|v| v.stall.end_ns <= a));
            let decided = recent
                .into_iter()
                .flat_map(|r| r.range(from..))
                .filter(|v| overlaps(&v.stall))
                .cloned();
            let undecided = self
                .pending
                .values()
                .filter(|s| s.cpu == cpu && overlaps(s))
                .map(|s| self.verdict(s));
            for v in decided.chain(undecided) {
                let (s, e) = (v.stall.start_ns, v.stall.end_ns);
                let overlap = e.min(b) - s.max(a);
                stalled[side] += overlap;
                let f = overlap as f64 / (e - s) as f64;
                for c in &v.culprits {
                    let ns = (c.ns as f64 * f).round() as Nanos;
                    if ns == 0 && c.class != CulpritClass::FreqChange {
                        continue;
                    }
                    match culprits
                        .iter_mut()
                        .find(|x| x.class == c.class && x.name == c.name && x.detail == c.detail)
                    {
                        Some(x) => x.ns += ns,
                        None => culprits.push(Share { ns, ..c.clone() }),
                    }
                }
            }
        }
        for c in &mut culprits {
            c.share = if transit == 0 {
                0.0
            } else {
                c.ns as f64 / transit as f64
            };
        }
        culprits.sort_by_key(|c| {
            (
                matches!(c.class, CulpritClass::Unexplained | CulpritClass::Lost),
                std::cmp::Reverse(c.ns),
            )
        });
        SpikeVerdict {
            spike,
            producer_cpu,
            consumer_cpu,
            producer_stalled_ns: stalled[0],
            consumer_stalled_ns: if producer_cpu == consumer_cpu {
                stalled[0]
            } else {
                stalled[1]
            },
            culprits,
        }
    }

    fn via(&self, c: &CpuRecords, r: &Interruption) -> String {
        let (kind, what_matches): (CauseKind, &dyn Fn(&Cause) -> bool) = match r.class {
            CulpritClass::Kworker => (CauseKind::QueueWork, &|k: &Cause| k.what == r.detail),
            CulpritClass::Ipi => (CauseKind::Ipi, &|_: &Cause| true),
            _ => return String::new(),
        };
        let lookback = match r.class {
            CulpritClass::Ipi => 1_000_000,
            _ => self.cfg.cause_lookback_ns,
        };
        c.causes
            .iter()
            .rev()
            .find(|k| {
                k.kind == kind
                    && k.at_ns <= r.start_ns
                    && k.at_ns + lookback >= r.start_ns
                    && what_matches(k)
            })
            .map(|k| {
                let verb = if kind == CauseKind::QueueWork {
                    "queued"
                } else {
                    "sent"
                };
                let what = if kind == CauseKind::Ipi && !k.what.is_empty() {
                    format!(" ({})", k.what)
                } else {
                    String::new()
                };
                format!(
                    "{verb} by {}[{}] on CPU {}{what}",
                    k.sender_comm, k.sender_pid, k.sender_cpu
                )
            })
            .unwrap_or_default()
    }
}

/// The records a timeline keeps: all of them up to `MAX_TIMELINE`, else the ones that
/// overlap the stall most — a long stall on a busy CPU can span thousands of task switches,
/// and the worst-N list must stay small whatever the load.
fn timeline_of(overlapping: &[&Interruption], start: Nanos, end: Nanos) -> Vec<Interruption> {
    if overlapping.len() <= MAX_TIMELINE {
        return overlapping.iter().map(|r| (*r).clone()).collect();
    }
    let overlap = |r: &Interruption| r.end_ns.min(end).saturating_sub(r.start_ns.max(start));
    let mut by_size: Vec<&Interruption> = overlapping.to_vec();
    by_size.sort_by_key(|r| std::cmp::Reverse(overlap(r)));
    by_size.truncate(MAX_TIMELINE);
    by_size.sort_by_key(|r| (r.start_ns, r.end_ns));
    by_size.into_iter().cloned().collect()
}

/// Records kept in one stall's timeline (see `timeline_of`).
pub const MAX_TIMELINE: usize = 64;

/// Returns the memory of a queue that a burst grew far beyond what it holds now. A burst of
/// kernel activity (a storm, a big file deletion) can hold ten times the usual records for a
/// moment; without this the queue keeps that capacity for the rest of the run, and a long
/// run's memory ratchets up with every burst. Large buffers are mmap'd by the allocator, so
/// shrinking them gives the pages back to the system.
fn give_back<T>(q: &mut VecDeque<T>) {
    const FLOOR: usize = 4096;
    if q.capacity() > FLOOR && q.len() < q.capacity() / 4 {
        q.shrink_to((q.len() * 2).max(FLOOR));
    }
}
