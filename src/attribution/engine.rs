//! The engine. Records arrive per CPU with delay (the record rings are drained every tens of
//! milliseconds, stalls come through their own queue), so stalls wait until the watermark
//! passes them; records older than the retention window are dropped, so memory stays
//! constant however long the run.
//!
//! Rules (docs/reading-a-report.md, "Attribution", says the same for users):
//! - A stall `[s, e]` on CPU c is explained by the records on c that overlap it.
//! - **Measured** time: nested time is counted once, to the innermost cause (osnoise's net
//!   durations): at each instant the covering record of the deepest level wins — NMI over
//!   hard IRQ, tick and IPI, over softirq, over task level (kworker, kthread, task, self);
//!   equal levels go to the later start (a work item inside its worker's run, an expired
//!   hrtimer inside the timer vector). So an IRQ inside a kworker's run gets its own time and
//!   the kworker the rest.
//! - **Hypervisor** time: time no record covers, during which the CPU's KVM steal clock grew
//!   (a steal window `(from, to]` between two probe reads of the clock). Each window's growth
//!   is given once, to the uncovered time inside it, earliest first, never more than the
//!   growth; what is left of a window that lies wholly inside the stall goes on to the
//!   task-level runs inside it (the host held the vCPU whichever task was current), taken
//!   from their measured time. The steal clock is the host's own measurement; only its place
//!   inside the window is inferred from where the guest ran no code, or else ran a task.
//! - **Inferred** time: an uncovered piece no longer than `edge_ns` that touches a record's
//!   start or end, with no steal in it, is that record's entry or exit path (interrupt entry,
//!   the switch code, the VM exit that delivered it). It is given to the record as
//!   `inferred_ns`, never added to its measured time.
//! - The rest is `unexplained` ("no kernel event and no steal"), or `lost` when kernel records
//!   of the CPU were lost in the window (the cause is then unknown, not absent).
//! - A frequency change (instantaneous) on c within the stall, or within `freq_lookback_ns`
//!   before it, is listed as a culprit with 0 ns and the gap before the stall; it takes no
//!   time from the other culprits or from the unexplained remainder.
//! - A reschedule IPI that is followed at once (within `edge_ns`) by a task-level run is
//!   the wake-up of that run: it keeps its own measured time (moving it to the task would
//!   pass one record's time off as another's), and its `via` names the task it woke.
//! - A message spike `[publish, receive]` is explained inside its own window, the two sides
//!   apart: a producer stall that contains the publish held the message back until it ended
//!   (or the receive); the consumer's stalls count only after that, inside the window. Each
//!   piece is swept again over its clipped window, so a spike's culprits never add up to
//!   more than its transit.

use std::collections::{BinaryHeap, VecDeque};

use super::chunked::{Chunked, Pos};
use super::nesting::Nesting;
use crate::model::{
    vector, Cause, CauseKind, Cpu, Culprit, CulpritClass, Interruption, Nanos, OwnIpiWhy, Sender,
    Spike, Stall, StealSample, ThreadRole, Via, Who, WorkItem,
};
use crate::platform::fast_hash::{FastHasher, FastMap};

/// An undecided spike: (receipt time, arrival number), the spike, (producer CPU, consumer CPU).
type PendingSpike = ((Nanos, u64), (Spike, Cpu, Cpu));

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long records are kept behind the watermark (covers the longest stall).
    pub retention_ns: Nanos,
    pub freq_lookback_ns: Nanos,
    /// How long before a kworker run a queue_work may have caused it.
    pub cause_lookback_ns: Nanos,
    /// How long before an IPI its send may have been.
    pub ipi_lookback_ns: Nanos,
    /// Longest uncovered piece next to a record that the entry/exit rule infers to be its.
    pub edge_ns: Nanos,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            retention_ns: 1_000_000_000,
            freq_lookback_ns: 10_000_000,
            cause_lookback_ns: 50_000_000,
            ipi_lookback_ns: 1_000_000,
            edge_ns: 20_000,
        }
    }
}

/// One culprit's part of a stall (or of a spike's window).
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// Who: what shares are merged and grouped by.
    pub culprit: Culprit,
    /// Who queued the work or sent the IPI, or the task a wake-up IPI woke, when the probes
    /// saw it (boxed: most culprits have none).
    pub via: Option<Box<Via>>,
    /// Time inside the culprit's own kernel records, net of nested ones; for `hypervisor`
    /// the steal clock's growth; for `unexplained` and `lost` the uncovered time itself.
    pub measured_ns: Nanos,
    /// Uncovered time given to it by the entry/exit rule (`INFERRED_RULE`).
    pub inferred_ns: Nanos,
    /// Time inside its task-level runs that the steal clock gave to `hypervisor` (the host
    /// held the vCPU while it was current): part of its records' span, not of `measured_ns`.
    /// An independent recorder of the guest (perf) sees it as the run's time.
    pub host_ns: Nanos,
    /// Distinct episodes (records, or uncovered pieces) that took part.
    pub episodes: u32,
    /// The longest single episode's part.
    pub longest_ns: Nanos,
    /// `ns()` over the stall's (or the spike's transit) time.
    pub share: f64,
}

impl Share {
    /// Measured and inferred time together.
    pub fn ns(&self) -> Nanos {
        self.measured_ns.saturating_add(self.inferred_ns)
    }

    /// The culprit's class.
    pub fn class(&self) -> CulpritClass {
        self.culprit.class
    }

    /// A culprit with nothing but uncovered time (hypervisor, unexplained, lost).
    fn uncovered(class: CulpritClass, who: Who, pieces: &[(Nanos, Nanos)]) -> Share {
        Share {
            culprit: Culprit { class, who },
            via: None,
            measured_ns: pieces.iter().map(|(a, b)| b - a).sum(),
            inferred_ns: 0,
            host_ns: 0,
            episodes: pieces.len() as u32,
            longest_ns: pieces.iter().map(|(a, b)| b - a).max().unwrap_or(0),
            share: 0.0,
        }
    }
}

/// The explanation of one stall.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub stall: Stall,
    /// Longest first; hypervisor, then the unexplained or lost remainder, last.
    pub culprits: Vec<Share>,
    /// Share of the stall with a named cause (measured, inferred or hypervisor).
    pub explained_share: f64,
    pub incomplete: bool,
    /// The records that overlapped the stall (for timelines and traces).
    pub timeline: Vec<Interruption>,
    /// Where in the stall the host held the vCPU (steal given to it), in time order.
    pub hypervisor: Vec<(Nanos, Nanos)>,
}

impl Verdict {
    pub fn unexplained_ns(&self) -> Nanos {
        self.culprits
            .iter()
            .filter(|c| c.culprit.class == CulpritClass::Unexplained)
            .map(|c| c.ns())
            .sum()
    }
}

/// The explanation of one message spike, the two sides apart: the producer side is the time
/// a producer stall held the message back from its publish; the consumer side is the
/// consumer's stalled time after that, inside the window. The two never overlap, so their
/// culprits together never exceed the transit.
#[derive(Debug, Clone, PartialEq)]
pub struct SpikeVerdict {
    pub spike: Spike,
    pub producer_cpu: Cpu,
    pub consumer_cpu: Cpu,
    /// Time the producer held the message after its publish time (stalled).
    pub producer_stalled_ns: Nanos,
    /// Consumer stalled time inside the rest of the window.
    pub consumer_stalled_ns: Nanos,
    /// Longest first, unexplained last; `share` is of the transit time.
    pub producer_culprits: Vec<Share>,
    pub consumer_culprits: Vec<Share>,
}

/// A run of the watched thread `own` itself (not its page faults, which interrupt its code,
/// nor a stretch in which the scheduler held it off its idle CPU, which is its wait).
fn is_own_run(r: &Interruption, own: u32) -> bool {
    own != 0
        && r.pid == own
        && r.class.level() == 1
        && r.class != CulpritClass::Fault
        && r.class != CulpritClass::Throttled
}

/// Maps keyed by CPU: the engine looks a CPU up for every record and every stall.
type ByCpu<T> = FastMap<Cpu, T>;

/// A steal-clock growth window and the part of its growth not yet given to a stall.
#[derive(Debug, Clone, Copy)]
struct StealWindow {
    sample: StealSample,
    left_ns: Nanos,
}

/// Old records and stalls dropped per stall decided, at most, in one step of `advance_some`.
const FORGET_PER_STALL: usize = 16;

/// Culprit lists kept for reuse, at most: what a step of `advance_some` decides in a run
/// (a few) and a backlog's batch in part; a few hundred bytes each.
const SPARE_CULPRITS: usize = 256;

/// Records longer than this are held apart (`CpuRecords::long`): a stall's sweep then looks
/// this far back among the short ones, whatever the longest record held — under an interrupt
/// storm tens of thousands of records a second, of which a few long task runs.
const SHORT_NS: Nanos = 1_000_000;

#[derive(Default)]
struct CpuRecords {
    /// Interval records up to `SHORT_NS` long, sorted by start (they arrive nearly in order:
    /// inserts go near the back); in chunks, so a storm's backlog never grows it by one large
    /// reallocation (`chunked`).
    records: Chunked<Interruption>,
    /// The longer ones, sorted by start: few, each looked at by every stall.
    long: VecDeque<Interruption>,
    freq: VecDeque<Interruption>,
    /// Sends (queue_work, IPIs) to this CPU, in time order.
    causes: Chunked<Cause>,
    lost: VecDeque<(Nanos, Nanos)>,
}

/// What a CPU without records reads: shared, so that deciding its stalls builds and drops
/// nothing.
static NO_RECORDS: CpuRecords = CpuRecords {
    records: Chunked::new(),
    long: VecDeque::new(),
    freq: VecDeque::new(),
    causes: Chunked::new(),
    lost: VecDeque::new(),
};

/// A decided stall kept for the spikes that overlap it.
#[derive(Debug, Clone)]
struct RecentStall {
    stall: Stall,
    hypervisor: Vec<(Nanos, Nanos)>,
}

#[derive(Default)]
pub struct Engine {
    cfg: EngineConfig,
    cpus: ByCpu<CpuRecords>,
    /// The bound of the last forgetting that dropped all it could (`forget_before`).
    forgotten_to: Option<Nanos>,
    /// Steal windows per CPU, oldest first (apart from `cpus`: deciding a stall reads the
    /// records and spends steal at once).
    steal: ByCpu<VecDeque<StealWindow>>,
    /// Set once a steal sample arrived or the probes said the clock exists.
    steal_clock: bool,
    /// Undecided stalls by (end time, arrival), in that order: they arrive nearly so, and a
    /// sorted queue takes them at its back where a `BTreeMap` searched and split nodes.
    pending: Chunked<((Nanos, u64), Stall)>,
    /// Start times of the undecided stalls, sorted (the oldest bounds what records must be
    /// kept).
    pending_starts: Chunked<Nanos>,
    seq: u64,
    /// Decided stalls still inside the retention window, per CPU, in end order.
    /// In chunks, like the records: under a storm that outruns the decisions this grows by
    /// thousands a second, and a doubling `VecDeque` was a megabyte copied and populated at once.
    recent: FastMap<(Cpu, ThreadRole), Chunked<RecentStall>>,
    /// Undecided spikes by receive time, with (producer CPU, consumer CPU). In sorted chunks:
    /// they arrive nearly in order, so nearly every one goes at the back (a B-tree's inserts
    /// were 6 % of the collector's CPU under an hrtimer storm, some 11,000 spikes a second).
    spikes: Chunked<PendingSpike>,
    decided_spikes: Vec<SpikeVerdict>,
    /// Verdicts of stalls shorter than this carry no timeline (only the worst stalls are
    /// kept with theirs; copying records for every stall is the engine's largest cost).
    timeline_from_ns: Nanos,
    scratch: Scratch,
}

/// A piece of a sweep: `[a, b)` and the record that wins it, `None` where none covers it.
type Piece = (Nanos, Nanos, Option<usize>);

/// A record in the sweep's heap, ordered like the nesting rule (see `Sweep::cover`).
type Active = (Nesting, usize);

/// Buffers of the sweeps and verdicts, kept by the engine between stalls: allocating them
/// afresh for every stall was a sixth of a stall's cost.
#[derive(Default)]
struct Scratch {
    /// Always empty here: only its capacity is kept (`relabel`).
    records: Vec<&'static Interruption>,
    woke: Vec<Option<usize>>,
    cuts: Vec<Nanos>,
    active: BinaryHeap<Active>,
    pieces: Vec<Piece>,
    ends_at: Vec<(Nanos, usize)>,
    starts_at: Vec<(Nanos, usize)>,
    uncovered: Vec<(Nanos, Nanos)>,
    /// Per record of a sweep: the time it was given (measured, inferred, the host's).
    per_record: Vec<RecordTime>,
    /// Uncovered time the steal did not take, and what of it no record's entry/exit took.
    rest: Vec<(Nanos, Nanos)>,
    unexplained: Vec<(Nanos, Nanos)>,
    /// Culprit lists of verdicts no one kept, emptied, for the next ones (`Engine::recycle`).
    spare_culprits: Vec<Vec<Share>>,
    /// Per CPU (numbers are small and dense), where the last stall's sweep began among its
    /// short records: the next stall's search starts there.
    near: Vec<Pos>,
}

/// An emptied vector of record references, its capacity kept for references of another
/// lifetime: the standard library collects a mapped `into_iter` in place when the layouts
/// agree, and the vector being empty, nothing is mapped.
fn relabel<'b>(mut v: Vec<&Interruption>) -> Vec<&'b Interruption> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// The elementary pieces of a window `[start, end]` on one CPU: each covered by the record
/// that wins it under the nesting rule, or uncovered. Its buffers come from a `Scratch` and
/// go back to it (`give_back`).
struct Sweep<'a> {
    records: Vec<&'a Interruption>,
    /// For a reschedule IPI: the task-level run it woke (named in its `via`).
    woke: Vec<Option<usize>>,
    /// Consecutive pieces, `None` where no record covers the time.
    pieces: Vec<Piece>,
    /// A record ending / starting exactly here (clamped to the window): where an uncovered
    /// piece's entry/exit path is inferred to belong.
    ends_at: Vec<(Nanos, usize)>,
    starts_at: Vec<(Nanos, usize)>,
    /// The uncovered pieces, in time order.
    uncovered: Vec<(Nanos, Nanos)>,
}

impl<'a> Sweep<'a> {
    /// `own`: a watched thread's kernel tid whose own runs are left out (a thread does not
    /// interrupt itself; its runs are recorded when another watched thread waits for the
    /// CPU), 0 for none.
    fn over(
        (cpu, c): (Cpu, &'a CpuRecords),
        (start, end): (Nanos, Nanos),
        edge_ns: Nanos,
        own: u32,
        scratch: &mut Scratch,
    ) -> Sweep<'a> {
        let mut sweep = Sweep {
            records: relabel(std::mem::take(&mut scratch.records)),
            woke: take_cleared(&mut scratch.woke),
            pieces: take_cleared(&mut scratch.pieces),
            ends_at: take_cleared(&mut scratch.ends_at),
            starts_at: take_cleared(&mut scratch.starts_at),
            uncovered: take_cleared(&mut scratch.uncovered),
        };
        let near = scratch.near.get(cpu as usize).copied().unwrap_or_default();
        let from = sweep.gather(c, (start, end), own, near);
        remember_near(&mut scratch.near, cpu, from);
        sweep.find_wake_ups(edge_ns);
        sweep.cut(start, end, &mut scratch.cuts);
        sweep.cover(&scratch.cuts, &mut scratch.active);
        let uncovered = sweep.pieces.iter().filter(|p| p.2.is_none());
        sweep.uncovered.extend(uncovered.map(|p| (p.0, p.1)));
        sweep
    }

    /// The pieces a task-level run covers, in time order.
    fn task_pieces(&self) -> Vec<(Nanos, Nanos)> {
        let records = &self.records;
        self.pieces
            .iter()
            .filter(|p| p.2.is_some_and(|i| records[i].class.level() == 1))
            .map(|p| (p.0, p.1))
            .collect()
    }

    /// Hands the buffers back for the next sweep.
    fn give_back(self, scratch: &mut Scratch) {
        scratch.records = relabel(self.records);
        scratch.woke = self.woke;
        scratch.pieces = self.pieces;
        scratch.ends_at = self.ends_at;
        scratch.starts_at = self.starts_at;
        scratch.uncovered = self.uncovered;
    }

    /// Short records starting before the window ends, back to the reach of the longest of
    /// them; long ones that reach into it; sorted by start, then end. The search for the
    /// first short one starts at `near`; returns where it ended.
    fn gather(
        &mut self,
        c: &'a CpuRecords,
        (start, end): (Nanos, Nanos),
        own: u32,
        near: Pos,
    ) -> Pos {
        let reach = start.saturating_sub(SHORT_NS);
        let from = c.records.position_near(near, |r| r.start_ns < reach);
        let long_upto = c.long.partition_point(|r| r.start_ns < end);
        let keep = |r: &Interruption| r.end_ns > start && !is_own_run(r, own);
        let records = &mut self.records;
        // Sorted by start: the window's records end at the first starting after it.
        c.records.for_each_from_while(from, |r| {
            if r.start_ns >= end {
                return false;
            }
            if keep(r) {
                records.push(r);
            }
            true
        });
        records.extend(c.long.range(..long_upto).filter(|r| keep(r)));
        records.sort_by_key(|r| (r.start_ns, r.end_ns));
        from
    }

    /// A reschedule IPI immediately followed by a task-level run was that run's wake-up
    /// (`records` is sorted by start: the first such run from the IPI's end on). A throttled
    /// stretch is no run: nothing ran in it to be woken.
    fn find_wake_ups(&mut self, edge_ns: Nanos) {
        let records = &self.records;
        self.woke.extend(records.iter().map(|r| {
            if r.class != CulpritClass::Ipi || r.id != vector::RESCHEDULE {
                return None;
            }
            let from = records.partition_point(|t| t.start_ns < r.end_ns);
            records[from..]
                .iter()
                .take_while(|t| t.start_ns - r.end_ns <= edge_ns)
                .position(|t| t.class.level() == 1 && t.class != CulpritClass::Throttled)
                .map(|i| from + i)
        }));
    }

    /// The window's cut points (its bounds and every record's, clamped), sorted and
    /// distinct; and where each record starts and ends.
    fn cut(&mut self, start: Nanos, end: Nanos, cuts: &mut Vec<Nanos>) {
        cuts.clear();
        cuts.extend([start, end]);
        // Few records per window: a list searched in order beats hashing (first one wins).
        for (i, r) in self.records.iter().enumerate() {
            let (rs, re) = (r.start_ns.clamp(start, end), r.end_ns.clamp(start, end));
            cuts.push(rs);
            cuts.push(re);
            self.ends_at.push((re, i));
            self.starts_at.push((rs, i));
        }
        cuts.sort_unstable();
        cuts.dedup();
    }

    /// The covering record of each piece is the top of a heap ordered like the rule
    /// (`Nesting`, then latest in sort order); records that ended before the
    /// piece are dropped lazily from the top. O(k log k) in the records.
    fn cover(&mut self, cuts: &[Nanos], active: &mut BinaryHeap<Active>) {
        active.clear();
        let records = &self.records;
        let mut next = 0;
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            while next < records.len() && records[next].start_ns <= a {
                let r = records[next];
                let rank = Nesting::of(r.class, r.parent, (r.start_ns, r.end_ns));
                active.push((rank, next));
                next += 1;
            }
            while active.peek().is_some_and(|&(.., i)| records[i].end_ns < b) {
                active.pop();
            }
            let winner = active.peek().map(|&(.., i)| i);
            match self.pieces.last_mut() {
                Some(last) if last.1 == a && last.2 == winner => last.1 = b,
                _ => self.pieces.push((a, b, winner)),
            }
        }
    }

    /// The first record (in sort order) ending exactly at `t`, clamped to the window.
    fn record_ending_at(&self, t: Nanos) -> Option<usize> {
        self.ends_at.iter().find(|e| e.0 == t).map(|e| e.1)
    }

    /// The first record (in sort order) starting exactly at `t`, clamped to the window.
    fn record_starting_at(&self, t: Nanos) -> Option<usize> {
        self.starts_at.iter().find(|e| e.0 == t).map(|e| e.1)
    }
}

/// The kernel's largest `NR_CPUS`: CPU numbers past it get no remembered place.
const MAX_CPUS: usize = 8192;

/// Remembers where `cpu`'s last sweep began (its place in `near` made on first use).
fn remember_near(near: &mut Vec<Pos>, cpu: Cpu, from: Pos) {
    let i = cpu as usize;
    if i >= MAX_CPUS {
        return;
    }
    if i >= near.len() {
        near.resize(i + 1, Pos::default());
    }
    near[i] = from;
}

/// A buffer taken out of the scratch, emptied.
fn take_cleared<T>(v: &mut Vec<T>) -> Vec<T> {
    let mut v = std::mem::take(v);
    v.clear();
    v
}

/// Gives steal growth to a stall `[start, end]`: each window's growth goes to the uncovered
/// time inside it, earliest first, and is spent; what is left of a window that lies wholly
/// inside the stall goes on to the task-level runs inside it (`tasks`, asked for only then):
/// the host held the vCPU whichever task was current, and no other stall can take it. Returns
/// the pieces it covers, in time order.
fn spend_steal(
    windows: &mut VecDeque<StealWindow>,
    (start, end): (Nanos, Nanos),
    uncovered: &[(Nanos, Nanos)],
    tasks: impl FnOnce() -> Vec<(Nanos, Nanos)>,
) -> Vec<(Nanos, Nanos)> {
    let mut given = Vec::new();
    give_steal(windows, uncovered, |_| true, &mut given);
    let inside = |w: &StealWindow| w.sample.from_ns >= start && w.sample.to_ns <= end;
    if windows.iter().any(|w| w.left_ns > 0 && inside(w)) {
        let before = given.len();
        give_steal(windows, &tasks(), inside, &mut given);
        if given.len() > before {
            given.sort_unstable();
        }
    }
    given
}

/// Gives the growth of the windows `eligible` picks to `pieces` (sorted), earliest first.
fn give_steal(
    windows: &mut VecDeque<StealWindow>,
    pieces: &[(Nanos, Nanos)],
    eligible: impl Fn(&StealWindow) -> bool,
    given: &mut Vec<(Nanos, Nanos)>,
) {
    for &(a, b) in pieces {
        let mut at = a;
        for w in windows.iter_mut() {
            if w.left_ns == 0 || w.sample.to_ns <= at || w.sample.from_ns >= b || !eligible(w) {
                continue;
            }
            let lo = at.max(w.sample.from_ns);
            let hi = b.min(w.sample.to_ns);
            let n = (hi - lo).min(w.left_ns);
            if n == 0 {
                continue;
            }
            w.left_ns -= n;
            given.push((lo, lo + n));
            at = lo + n;
        }
    }
}

/// `pieces` minus `taken` (both sorted; what of `taken` lies outside `pieces` — steal given
/// inside a task's run — takes nothing), into `out`.
fn subtract(pieces: &[(Nanos, Nanos)], taken: &[(Nanos, Nanos)], out: &mut Vec<(Nanos, Nanos)>) {
    out.clear();
    for &(a, b) in pieces {
        let mut at = a;
        for &(ta, tb) in taken.iter().filter(|t| t.0 < b && t.1 > a) {
            if ta > at {
                out.push((at, ta));
            }
            at = at.max(tb);
        }
        if at < b {
            out.push((at, b));
        }
    }
}

/// Clips sorted pieces to `[a, b]`.
fn clip(pieces: &[(Nanos, Nanos)], a: Nanos, b: Nanos) -> Vec<(Nanos, Nanos)> {
    pieces
        .iter()
        .filter(|p| p.0 < b && p.1 > a)
        .map(|p| (p.0.max(a), p.1.min(b)))
        .collect()
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
        let key = (s.end_ns, self.seq);
        self.pending.insert_by_key((key, s), |p| p.0);
        self.pending_starts.insert_by_key(s.start_ns, |&t| t);
    }

    pub fn push_interruption(&mut self, i: Interruption) {
        let c = self.cpus.entry(i.cpu).or_default();
        if i.class == CulpritClass::FreqChange {
            c.freq.push_back(i);
        } else {
            // Records arrive nearly in start order: most go to the back without a search.
            if i.duration_ns() > SHORT_NS {
                let list = &mut c.long;
                if list.back().is_none_or(|r| r.start_ns <= i.start_ns) {
                    list.push_back(i);
                } else {
                    let at = list.partition_point(|r| r.start_ns <= i.start_ns);
                    list.insert(at, i);
                }
            } else if c.records.back().is_none_or(|r| r.start_ns <= i.start_ns) {
                c.records.push_back(i);
            } else {
                let start = i.start_ns;
                c.records.insert(i, |r| r.start_ns <= start);
            }
        }
    }

    pub fn push_cause(&mut self, cause: Cause) {
        let causes = &mut self.cpus.entry(cause.target_cpu).or_default().causes;
        // Held in time order (a record's sender is searched for by time); they arrive
        // nearly in order, from the record rings.
        if causes.back().is_none_or(|k| k.at_ns <= cause.at_ns) {
            causes.push_back(cause);
        } else {
            let at = cause.at_ns;
            causes.insert(cause, |k| k.at_ns <= at);
        }
    }

    /// The host kept `s.cpu` off its physical CPU for `s.steal_ns` within `(from, to]`.
    pub fn push_steal(&mut self, s: StealSample) {
        self.steal_clock = true;
        let w = self.steal.entry(s.cpu).or_default();
        let at = w.partition_point(|x| x.sample.to_ns <= s.to_ns);
        w.insert(
            at,
            StealWindow {
                sample: s,
                left_ns: s.steal_ns,
            },
        );
    }

    /// The probes read a steal clock (even if it never grew): uncovered time is then "no
    /// kernel event and no steal", not "maybe the hypervisor".
    pub fn set_steal_clock(&mut self, present: bool) {
        self.steal_clock = present;
    }

    /// Only stalls at least this long get their records copied into `Verdict::timeline`.
    pub fn set_timeline_from(&mut self, ns: Nanos) {
        self.timeline_from_ns = ns;
    }

    /// A message spike between a producer on `producer_cpu` and a consumer on `consumer_cpu`.
    pub fn push_spike(&mut self, spike: Spike, producer_cpu: Cpu, consumer_cpu: Cpu) {
        self.seq += 1;
        self.spikes.insert_by_key(
            (
                (spike.receive_ns, self.seq),
                (spike, producer_cpu, consumer_cpu),
            ),
            |s| s.0,
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

    /// Stalls taken in and not decided yet, and the end of the oldest of them.
    pub fn undecided_stalls(&self) -> (usize, Option<Nanos>) {
        (self.pending.len(), self.pending.front().map(|p| p.1.end_ns))
    }

    /// Stalls and spikes waiting for a decision.
    pub fn pending(&self) -> usize {
        self.pending.len() + self.spikes.len()
    }

    /// Records held now (for the bounded-memory check).
    pub fn retained(&self) -> usize {
        self.cpus
            .values()
            .map(|c| c.records.len() + c.long.len() + c.freq.len() + c.causes.len() + c.lost.len())
            .sum::<usize>()
            + self.steal.values().map(|w| w.len()).sum::<usize>()
            + self.pending.len()
            + self.recent.values().map(|r| r.len()).sum::<usize>()
            + self.spikes.len()
    }

    /// Decides every stall that ended before `watermark` (all records that can overlap it
    /// have arrived), then drops records too old to matter.
    pub fn advance(&mut self, watermark: Nanos) -> Vec<Verdict> {
        let mut out = Vec::new();
        while self.advance_some(watermark, usize::MAX, &mut out) {}
        out
    }

    /// Like `advance`, in steps of at most `limit` stalls and `limit` spikes: appends their
    /// verdicts to `out` and says whether more remain below the watermark. Old records are
    /// dropped once none remain, so a caller may stop between steps at no cost in memory
    /// beyond what is pending.
    pub fn advance_some(&mut self, watermark: Nanos, limit: usize, out: &mut Vec<Verdict>) -> bool {
        let mut stalls = 0;
        while let Some(&((end, _), _)) = self.pending.front() {
            if end > watermark {
                break;
            }
            if stalls == limit {
                return true;
            }
            stalls += 1;
            if let Some((_, s)) = self.pending.pop_front() {
                // Stalls end nearly in start order too: the start is nearly always first.
                if self.pending_starts.front() == Some(&s.start_ns) {
                    self.pending_starts.pop_front();
                } else {
                    let at = self.pending_starts.position(|&t| t < s.start_ns);
                    self.pending_starts.remove(at);
                }
                let v = self.decide(&s);
                self.recent
                    .entry((s.cpu, s.thread))
                    .or_default()
                    .push_back(RecentStall {
                        stall: s,
                        hypervisor: v.hypervisor.clone(),
                    });
                out.push(v);
            }
        }
        let mut spikes = 0;
        while let Some(&((receive, _), _)) = self.spikes.front() {
            if receive > watermark {
                break;
            }
            if spikes == limit {
                return true;
            }
            spikes += 1;
            if let Some((_, (spike, p, c))) = self.spikes.pop_front() {
                // The stalls' buffers serve the spikes' sweeps too (the engine is not
                // borrowed by them meanwhile): under an hrtimer storm, some 11,000 spikes a
                // second each allocated a sweep's buffers afresh.
                let mut scratch = std::mem::take(&mut self.scratch);
                let v = self.spike_verdict(spike, p, c, &mut scratch);
                self.scratch = scratch;
                self.decided_spikes.push(v);
            }
        }
        let horizon = watermark.saturating_sub(self.cfg.retention_ns);
        !self.forget_before(horizon, limit.saturating_mul(FORGET_PER_STALL))
    }

    /// Drops what no undecided stall or spike can reach any more, at most about `limit`
    /// records and stalls per call; true once nothing is left to drop.
    fn forget_before(&mut self, horizon: Nanos, limit: usize) -> bool {
        let mut left = limit;
        let oldest_pending = self.pending_starts.front().map_or(u64::MAX, |&start| start);
        let keep_from = horizon.min(oldest_pending.saturating_sub(self.cfg.freq_lookback_ns));
        // The collector decides a few stalls per call: within one of its turns the bound
        // seldom moves, and a pass with the bound of one that dropped all it could would
        // find nothing (a record arriving late behind it waits for the bound to move: no
        // stall still to decide can reach it).
        if self.forgotten_to == Some(keep_from) {
            return true;
        }
        for r in self.recent.values_mut() {
            left -= r.drop_front_while(left, |v| v.stall.end_ns < keep_from);
        }
        // A watch's threads come and go by the thousand: their emptied lists go with them.
        self.recent.retain(|_, r| !r.is_empty());
        for w in self.steal.values_mut() {
            while w.front().is_some_and(|x| x.sample.to_ns < keep_from) {
                w.pop_front();
            }
        }
        for c in self.cpus.values_mut() {
            // Sorted by start: drop from the front; a record there holds back shorter ones
            // behind it for at most its own length (`SHORT_NS` among the short ones).
            left -= c.records.drop_front_while(left, |r| r.end_ns < keep_from);
            c.long.retain(|r| r.end_ns >= keep_from);
            // Both arrive in time order, near enough: from the front.
            let freq_from = keep_from.saturating_sub(self.cfg.freq_lookback_ns);
            while c.freq.front().is_some_and(|r| r.start_ns < freq_from) {
                c.freq.pop_front();
            }
            let cause_from = keep_from.saturating_sub(self.cfg.cause_lookback_ns);
            left -= c.causes.drop_front_while(left, |r| r.at_ns < cause_from);
            c.lost.retain(|l| l.1 >= keep_from);
        }
        let done = left > 0;
        if done {
            self.forgotten_to = Some(keep_from);
        }
        done
    }

    /// Takes back a verdict no one keeps: its culprit list's storage serves a later stall
    /// (allocating one per stall and freeing it was a twentieth of a stall's cost).
    pub fn recycle(&mut self, v: Verdict) {
        let mut culprits = v.culprits;
        let spare = &mut self.scratch.spare_culprits;
        if culprits.capacity() > 0 && spare.len() < SPARE_CULPRITS {
            culprits.clear();
            spare.push(culprits);
        }
    }

    /// Decides everything still pending (end of run).
    pub fn finish(&mut self) -> Vec<Verdict> {
        self.advance(u64::MAX)
    }

    /// The verdict for one stall, spending the steal it is given.
    fn decide(&mut self, s: &Stall) -> Verdict {
        let c = self.cpus.get(&s.cpu).unwrap_or(&NO_RECORDS);
        let (start, end) = (s.start_ns, s.end_ns.max(s.start_ns));
        let own = match s.thread {
            ThreadRole::Watched(tid) => tid,
            ThreadRole::Producer | ThreadRole::Consumer(_) => 0,
        };
        let sweep = Sweep::over(
            (s.cpu, c),
            (start, end),
            self.cfg.edge_ns,
            own,
            &mut self.scratch,
        );
        let hypervisor = match self.steal.get_mut(&s.cpu) {
            Some(w) => spend_steal(w, (start, end), &sweep.uncovered, || sweep.task_pieces()),
            None => Vec::new(),
        };
        let with_timeline = end - start >= self.timeline_from_ns;
        let v = verdict_of(
            &self.cfg,
            self.steal_clock,
            (c, &sweep),
            s,
            hypervisor,
            with_timeline,
            &mut self.scratch,
        );
        sweep.give_back(&mut self.scratch);
        v
    }

    fn spike_verdict(
        &self,
        spike: Spike,
        producer_cpu: Cpu,
        consumer_cpu: Cpu,
        scratch: &mut Scratch,
    ) -> SpikeVerdict {
        let (a, b) = (spike.publish_ns, spike.receive_ns.max(spike.publish_ns));
        let transit = b - a;
        let stalls_of = |cpu: Cpu, role: ThreadRole| {
            let mut out: Vec<&RecentStall> = Vec::new();
            if let Some(r) = self.recent.get(&(cpu, role)) {
                // One thread's stalls do not overlap and are held in end order, so in start
                // order too: from the first that ends after the spike's publication to the
                // first that starts after its receipt.
                let from = r.position(|v| v.stall.end_ns <= a);
                let to = r.position(|v| v.stall.start_ns < b);
                r.for_each_between(from, to, |v| out.push(v));
            }
            out.into_iter()
        };
        // The producer stall in which the message was published held it back until it ended.
        let held_until = stalls_of(producer_cpu, ThreadRole::Producer)
            .filter(|v| v.stall.start_ns <= a && v.stall.end_ns > a)
            .map(|v| (v.stall.end_ns.min(b), v))
            .max_by_key(|(until, _)| *until);
        let mut producer = Vec::new();
        let mut visible = a;
        if let Some((until, v)) = held_until {
            producer = self.window_shares(producer_cpu, (a, until), &v.hypervisor, scratch);
            visible = until;
        }
        let mut consumer: Vec<Share> = Vec::new();
        let mut consumer_stalled = 0;
        for v in stalls_of(consumer_cpu, ThreadRole::Consumer(spike.consumer)) {
            let (lo, hi) = (v.stall.start_ns.max(visible), v.stall.end_ns.min(b));
            if hi <= lo {
                continue;
            }
            consumer_stalled += hi - lo;
            merge_shares(
                &mut consumer,
                self.window_shares(consumer_cpu, (lo, hi), &v.hypervisor, scratch),
            );
        }
        for list in [&mut producer, &mut consumer] {
            set_shares(list, transit);
            sort_shares(list);
        }
        SpikeVerdict {
            spike,
            producer_cpu,
            consumer_cpu,
            producer_stalled_ns: visible - a,
            consumer_stalled_ns: consumer_stalled,
            producer_culprits: producer,
            consumer_culprits: consumer,
        }
    }

    /// The culprits of `[a, b]` on `cpu` (a clipped stall), swept again; `hypervisor` is
    /// where the stall was given steal.
    fn window_shares(
        &self,
        cpu: Cpu,
        (a, b): (Nanos, Nanos),
        hypervisor: &[(Nanos, Nanos)],
        scratch: &mut Scratch,
    ) -> Vec<Share> {
        let c = self.cpus.get(&cpu).unwrap_or(&NO_RECORDS);
        let sweep = Sweep::over((cpu, c), (a, b), self.cfg.edge_ns, 0, scratch);
        let stall = Stall {
            cpu,
            thread: ThreadRole::Producer,
            start_ns: a,
            end_ns: b,
        };
        let v = verdict_of(
            &self.cfg,
            self.steal_clock,
            (c, &sweep),
            &stall,
            clip(hypervisor, a, b),
            false,
            scratch,
        );
        sweep.give_back(scratch);
        v.culprits
    }
}

/// Builds a verdict from a sweep and the steal it was given (see the rules at the top).
fn verdict_of(
    cfg: &EngineConfig,
    steal_clock: bool,
    (c, sweep): (&CpuRecords, &Sweep<'_>),
    s: &Stall,
    hypervisor: Vec<(Nanos, Nanos)>,
    with_timeline: bool,
    scratch: &mut Scratch,
) -> Verdict {
    let (start, end) = (s.start_ns, s.end_ns.max(s.start_ns));
    let total = end - start;
    let per_record = &mut scratch.per_record;
    per_record.clear();
    per_record.resize(sweep.records.len(), RecordTime::default());
    // Steal given inside a task-level run is the hypervisor's, not the run's.
    let mut held = hypervisor.iter().peekable();
    for &(a, b, w) in &sweep.pieces {
        if let Some(i) = w {
            while held.next_if(|h| h.1 <= a).is_some() {}
            let taken: Nanos = held
                .clone()
                .take_while(|h| h.0 < b)
                .map(|h| h.1.min(b) - h.0.max(a))
                .sum();
            per_record[i].measured += b - a - taken;
            per_record[i].host += taken;
        }
    }
    // Uncovered time: steal first, then the entry/exit rule, then nothing.
    subtract(&sweep.uncovered, &hypervisor, &mut scratch.rest);
    let unexplained = &mut scratch.unexplained;
    unexplained.clear();
    for &(a, b) in &scratch.rest {
        let next_to = (b - a <= cfg.edge_ns)
            .then(|| {
                sweep
                    .record_ending_at(a)
                    .or_else(|| sweep.record_starting_at(b))
            })
            .flatten();
        match next_to {
            Some(i) => per_record[i].inferred += b - a,
            None => unexplained.push((a, b)),
        }
    }
    let out = scratch.spare_culprits.pop().unwrap_or_default();
    let mut culprits = record_shares(cfg, c, sweep, per_record, out);
    freq_shares(cfg, c, start, end, &mut culprits);
    if !hypervisor.is_empty() {
        culprits.push(Share::uncovered(
            CulpritClass::Hypervisor,
            Who::Host { cpu: s.cpu },
            &hypervisor,
        ));
    }
    let incomplete = c.lost.iter().any(|&(a, b)| a <= end && b >= start);
    if !unexplained.is_empty() {
        // With records lost in the window, "no kernel event" cannot be claimed: the
        // remainder's cause is unknown.
        let (class, who) = if incomplete {
            (CulpritClass::Lost, Who::Lost)
        } else {
            (CulpritClass::Unexplained, Who::Unexplained { steal_clock })
        };
        culprits.push(Share::uncovered(class, who, unexplained));
    }
    set_shares(&mut culprits, total);
    let named: Nanos = culprits
        .iter()
        .filter(|c| c.culprit.class.info().named)
        .map(|c| c.ns())
        .sum();
    Verdict {
        stall: *s,
        culprits,
        explained_share: if total == 0 {
            0.0
        } else {
            named as f64 / total as f64
        },
        incomplete,
        // Copying records is the engine's largest cost: only stalls long enough to be
        // kept carry them.
        timeline: if with_timeline {
            timeline_of(&sweep.records, start, end)
        } else {
            Vec::new()
        },
        hypervisor,
    }
}

/// A record's part of one stall.
#[derive(Debug, Clone, Copy, Default)]
struct RecordTime {
    measured: Nanos,
    inferred: Nanos,
    /// Steal given inside it (`Share::host_ns`).
    host: Nanos,
}

/// The records' time grouped by culprit, longest first, in `out` (empty, its capacity reused).
fn record_shares(
    cfg: &EngineConfig,
    c: &CpuRecords,
    sweep: &Sweep<'_>,
    per_record: &[RecordTime],
    mut out: Vec<Share>,
) -> Vec<Share> {
    let mut index = ShareIndex::default();
    for (i, t) in per_record.iter().enumerate() {
        let RecordTime {
            measured,
            inferred,
            host,
        } = *t;
        if measured + inferred + host == 0 {
            continue;
        }
        let r = sweep.records[i];
        let sent = sender(cfg, c, r);
        let own = match sent {
            Some(k) if k.sender_is_self && r.class == CulpritClass::Ipi => Some(own_ipi(r, k)),
            _ => None,
        };
        let (class, who) = match &own {
            Some((class, who)) => (*class, who),
            None => (r.class, &r.who),
        };
        match index.find(&out, class, who) {
            Some(k) => {
                let s = &mut out[k];
                s.measured_ns += measured;
                s.inferred_ns += inferred;
                s.host_ns += host;
                s.episodes += 1;
                s.longest_ns = s.longest_ns.max(measured);
            }
            None => {
                let woke = sweep.woke[i].map(|t| sweep.records[t].who.clone());
                let via = (sent.is_some() || woke.is_some()).then(|| {
                    Box::new(Via {
                        sender: sent.map(sender_of),
                        woke,
                    })
                });
                index.add(&out, class, who);
                out.push(Share {
                    culprit: Culprit {
                        class,
                        who: who.clone(),
                    },
                    via,
                    measured_ns: measured,
                    inferred_ns: inferred,
                    host_ns: host,
                    episodes: 1,
                    longest_ns: measured,
                    share: 0.0,
                });
            }
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse((s.ns(), s.measured_ns)));
    fold_pids(&mut out);
    out
}

/// Where each culprit of a stall is among its shares. Most stalls have a handful, found by a
/// scan; past `SCANNED` distinct ones (a wait behind thousands of runnable threads has one
/// per thread), by their hash, so that a stall costs what its records do, not their square.
#[derive(Default)]
struct ShareIndex {
    by_hash: FastMap<u64, usize>,
}

/// Distinct culprits of a stall looked for by a scan before `ShareIndex` hashes them.
const SCANNED: usize = 16;

impl ShareIndex {
    fn hash(class: CulpritClass, who: &Who) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = std::hash::BuildHasherDefault::<FastHasher>::default().build_hasher();
        class.hash(&mut h);
        who.hash(&mut h);
        h.finish()
    }

    fn find(&mut self, out: &[Share], class: CulpritClass, who: &Who) -> Option<usize> {
        let same = |s: &Share| s.culprit.class == class && s.culprit.who == *who;
        if out.len() <= SCANNED {
            return out.iter().position(same);
        }
        if self.by_hash.is_empty() {
            for (i, s) in out.iter().enumerate() {
                self.by_hash
                    .entry(Self::hash(s.culprit.class, &s.culprit.who))
                    .or_insert(i);
            }
        }
        match self.by_hash.get(&Self::hash(class, who)) {
            Some(&i) if same(&out[i]) => Some(i),
            // Two culprits whose hashes collide: the second is found by a scan.
            Some(_) => out.iter().position(same),
            None => None,
        }
    }

    /// Culprit `who` is about to be pushed at `out.len()`.
    fn add(&mut self, out: &[Share], class: CulpritClass, who: &Who) {
        if !self.by_hash.is_empty() {
            self.by_hash
                .entry(Self::hash(class, who))
                .or_insert(out.len());
        }
    }
}

/// Culprits naming a pid (tasks, sleepers woken by their hrtimer) a verdict tells apart, the
/// longest first; the others are folded by command name (`Who::pid_folded`), so that a wait
/// behind thousands of runnable threads is a verdict of a bounded size, like its timeline
/// (`MAX_TIMELINE`).
pub const PIDS_NAMED: usize = 64;

/// Folds the shares naming a pid after the first `PIDS_NAMED` (in `shares`' order, longest
/// first) into one share per pid-less culprit; the result is in that order again.
fn fold_pids(shares: &mut Vec<Share>) {
    let names_pid = |s: &Share| s.culprit.who.pid_folded().is_some();
    if shares.iter().filter(|s| names_pid(s)).count() <= PIDS_NAMED {
        return;
    }
    let mut named = 0;
    let mut kept = Vec::with_capacity(PIDS_NAMED * 2);
    let mut folded: FastMap<Culprit, Share> = FastMap::default();
    for s in shares.drain(..) {
        let Some(who) = s.culprit.who.pid_folded().filter(|_| named == PIDS_NAMED) else {
            named += usize::from(names_pid(&s));
            kept.push(s);
            continue;
        };
        let key = Culprit {
            class: s.culprit.class,
            who,
        };
        let f = folded.entry(key.clone()).or_insert_with(|| Share {
            culprit: key,
            via: None,
            measured_ns: 0,
            inferred_ns: 0,
            host_ns: 0,
            episodes: 0,
            longest_ns: 0,
            share: 0.0,
        });
        f.measured_ns += s.measured_ns;
        f.inferred_ns += s.inferred_ns;
        f.host_ns += s.host_ns;
        f.episodes += s.episodes;
        f.longest_ns = f.longest_ns.max(s.longest_ns);
    }
    kept.extend(folded.into_values());
    kept.sort_by(|a, b| {
        (b.ns(), b.measured_ns)
            .cmp(&(a.ns(), a.measured_ns))
            .then_with(|| a.culprit.cmp(&b.culprit))
    });
    *shares = kept;
}

/// Frequency changes on the CPU within the window or just before it: named, with no time.
fn freq_shares(cfg: &EngineConfig, c: &CpuRecords, start: Nanos, end: Nanos, out: &mut Vec<Share>) {
    for f in c
        .freq
        .iter()
        .filter(|f| f.start_ns <= end && f.start_ns + cfg.freq_lookback_ns >= start)
    {
        let mut who = f.who.clone();
        if let Who::Freq { before_ns, .. } = &mut who {
            *before_ns = start.saturating_sub(f.start_ns);
        }
        out.push(Share {
            culprit: Culprit {
                class: CulpritClass::FreqChange,
                who,
            },
            via: None,
            measured_ns: 0,
            inferred_ns: 0,
            host_ns: 0,
            episodes: 1,
            longest_ns: 0,
            share: 0.0,
        });
    }
}

fn set_shares(list: &mut [Share], total: Nanos) {
    for c in list {
        c.share = if total == 0 {
            0.0
        } else {
            c.ns() as f64 / total as f64
        };
    }
}

/// Named causes longest first, then hypervisor, then what has no cause.
fn sort_shares(list: &mut [Share]) {
    list.sort_by_key(|c| {
        (
            match c.culprit.class {
                CulpritClass::Hypervisor => 1,
                CulpritClass::Unexplained | CulpritClass::Lost => 2,
                CulpritClass::Kworker
                | CulpritClass::Kthread
                | CulpritClass::Task
                | CulpritClass::Irq
                | CulpritClass::Softirq
                | CulpritClass::TimerTick
                | CulpritClass::Ipi
                | CulpritClass::Nmi
                | CulpritClass::FreqChange
                | CulpritClass::Fault
                | CulpritClass::Throttled
                | CulpritClass::SelfNoise => 0,
            },
            std::cmp::Reverse((c.ns(), c.measured_ns)),
        )
    });
}

/// Adds `more` into `into`, culprit by culprit.
fn merge_shares(into: &mut Vec<Share>, more: Vec<Share>) {
    for c in more {
        match into.iter_mut().find(|x| x.culprit == c.culprit) {
            Some(x) => {
                x.measured_ns += c.measured_ns;
                x.inferred_ns += c.inferred_ns;
                x.episodes += c.episodes;
                x.longest_ns = x.longest_ns.max(c.longest_ns);
                if x.via.is_none() {
                    x.via = c.via;
                }
            }
            None => into.push(c),
        }
    }
}

/// Who queued a kworker's work function shortly before it ran, or sent an IPI: a send of the
/// same vector (a reschedule IPI carries no callback; a call-function IPI does).
fn sender<'c>(cfg: &EngineConfig, c: &'c CpuRecords, r: &Interruption) -> Option<&'c Cause> {
    // (what kind of send, how far back, whether it carried a callback)
    let (kind, lookback, callback) = match r.class {
        CulpritClass::Kworker => (CauseKind::QueueWork, cfg.cause_lookback_ns, None),
        CulpritClass::Ipi => match r.id {
            vector::RESCHEDULE => (CauseKind::Ipi, cfg.ipi_lookback_ns, Some(false)),
            vector::CALL_FUNCTION | vector::CALL_FUNCTION_SINGLE => {
                (CauseKind::Ipi, cfg.ipi_lookback_ns, Some(true))
            }
            // irq_work and the others are raised locally: no send to match.
            _ => return None,
        },
        CulpritClass::Kthread
        | CulpritClass::Task
        | CulpritClass::Irq
        | CulpritClass::Softirq
        | CulpritClass::TimerTick
        | CulpritClass::Nmi
        | CulpritClass::FreqChange
        | CulpritClass::Fault
        | CulpritClass::Throttled
        | CulpritClass::SelfNoise
        | CulpritClass::Hypervisor
        | CulpritClass::Unexplained
        | CulpritClass::Lost => return None,
    };
    // The latest send at or before the record's start, back to the lookback.
    let upto = c.causes.position(|k| k.at_ns <= r.start_ns);
    c.causes
        .rev_before(upto)
        .take_while(|k| k.at_ns + lookback >= r.start_ns)
        .find(|k| {
            k.kind == kind
                && match callback {
                    // A kworker's queue_work names the same work function.
                    None => match &r.who {
                        Who::Work {
                            item: WorkItem::Function(f),
                            ..
                        } => *k.what == **f,
                        _ => false,
                    },
                    Some(with) => k.what.is_empty() != with,
                }
        })
}

/// The sender of a cause, as a culprit's `via` carries it.
fn sender_of(k: &Cause) -> Sender {
    Sender {
        kind: k.kind,
        cpu: k.sender_cpu,
        comm: k.sender_comm.as_str().into(),
        pid: k.sender_pid,
        function: k.what.as_str().into(),
        from: k.sent_from,
    }
}

/// An IPI jitterscope sent itself is its own noise (`self`), named with why it was sent.
fn own_ipi(r: &Interruption, k: &Cause) -> (CulpritClass, Who) {
    let sender = k.sender_comm.as_str().into();
    let why = if k.what.contains("flush_tlb") {
        OwnIpiWhy::TlbShootdown { sender }
    } else if k.what.is_empty() {
        OwnIpiWhy::WakeUp { sender }
    } else {
        OwnIpiWhy::Callback {
            function: k.what.as_str().into(),
            sender,
        }
    };
    (CulpritClass::SelfNoise, Who::OwnIpi { vector: r.id, why })
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
