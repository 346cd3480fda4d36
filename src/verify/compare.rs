//! jitterscope's measured time per cause on one CPU against perf's net durations over the
//! same window: per cause the two times, their ratio and whether they agree within the
//! cause's tolerance, perf's time of unknown owner, and the overall agreement
//! `1 − Σ|js − perf| / (2 Σ perf)`. Causes are joined by name, whatever their class (the tick
//! can sit in several rows, one of them of class `self`); a kernel thread that jitterscope
//! names by its comm joins perf's `comm[pid]`. Steal that jitterscope gave to `hypervisor`
//! from inside a cause's runs (`host_ns`) is added back to that cause: perf sees the guest's
//! clock only, so a run the host preempted is one span to it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::measured::Measured;
use super::perf::{NetDurations, Vector};
use crate::model::{CulpritClass, Nanos};
use crate::units::fmt_ns;

/// How close the two must be.
#[derive(Debug, Clone, PartialEq)]
pub struct Tolerances {
    /// Task-level causes (kworkers, kernel threads, tasks, jitterscope's own threads) and
    /// IRQ-level ones (hard IRQs, softirqs, IPIs, NMIs): relative to perf's time.
    pub task_and_irq: f64,
    /// The local timer, relative to perf's time. Its episodes are a few µs long, so the
    /// attach order's bias is a large share of them: with the order known it is allowed for
    /// per piece (`handler_ns`) and the tick is held as tightly as the rest (a tick 1.2 times
    /// too long fails with perf first, where `scripts/verify.sh` puts the tick at 0.93–0.96 of
    /// perf's).
    pub local_timer: f64,
    /// Causes under this in both recorders are listed, not graded.
    pub floor_ns: Nanos,
    /// How far from 1 a cause's ratio may lie in one attach order when the other order puts
    /// it on the other side (`across_orders`): the tracer attached second sees each episode
    /// shorter by its predecessor's handler, 0.3–0.45 µs per episode on the 2-CPU test VM
    /// (reschedule IPIs of ~2 µs matched one by one between the two recordings of
    /// `scripts/verify.sh --order both`: ratios 0.76 with perf first, 1.23 with jitterscope
    /// first). Beyond it, the difference is more than the handlers.
    pub order_bias: f64,
    /// The most one tracer's handler shifts one piece of a cause for the tracer attached after
    /// it at the same tracepoints: two tracers on one tracepoint run one after the other, and
    /// the second stamps each event after the first one's handler, which costs more at an
    /// episode's entry than at its exit. 0.3–0.7 µs per piece on the 2-CPU test VM (the tick
    /// and reschedule IPIs in `scripts/verify.sh`), up to 1.2 µs on an AMD host
    /// (`tests/watch_bpf.rs`, the injected IRQ with jitterscope first). With the order known (`first`), a cause may lie that much per
    /// piece of perf's further on the order's side: under perf's with perf first, over it
    /// with jitterscope first.
    pub handler_ns: Nanos,
    /// Which tracer was attached first at each tracepoint of the recording; None: not known,
    /// and no allowance for the handlers is made.
    pub first: Option<FirstAttached>,
    /// Least overall agreement: the figure `scripts/verify.sh` measures is 0.999–1.000 on
    /// every scenario and both CPUs of the test VM; what is left is room for one graded
    /// cause of a few ms outside its tolerance.
    pub agreement: f64,
    /// Least agreement of the kept spikes' culprits with perf's events in their windows
    /// (`spikes`), summed over every window: µs-long windows whose edges are the workload's
    /// own clock reads, not tracepoints, so a piece cut by an edge differs by up to the
    /// workload's loop between the two recorders. `scripts/verify.sh` measures 0.99–1.00 in
    /// every scenario; what is left is room for a few spikes' windows cut differently.
    pub spike_agreement: f64,
    /// Least share of the spikes' sides whose largest culprit is perf's largest in the
    /// window: 99–100 % in `scripts/verify.sh`'s scenarios, the rest µs-long windows where two
    /// culprits of a few µs each are within the handlers' bias of each other.
    pub spike_same_first: f64,
    /// How far perf's first and last events on the CPU may lie inside the window.
    pub coverage_slack_ns: Nanos,
    /// A watched thread's total wake-up delay (`--wakeups`), relative to perf's.
    pub wakeup_total: f64,
    /// How far the two recorders' figures for one wake-up delay may differ: each stamps the
    /// wake-up and the switch-in in its own handler of the same tracepoint, so each stamp
    /// lies one handler's run (under a microsecond on the test VM, `tests/watch_bpf.rs`)
    /// from the other recorder's.
    pub wakeup_stamp_ns: Nanos,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            task_and_irq: 0.05,
            local_timer: 0.05,
            floor_ns: 1_000_000,
            order_bias: 0.30,
            handler_ns: 1_200,
            first: None,
            agreement: 0.97,
            coverage_slack_ns: 20_000_000,
            spike_agreement: 0.95,
            spike_same_first: 0.90,
            wakeup_total: 0.05,
            wakeup_stamp_ns: 1_000,
        }
    }
}

/// The tracer attached first at each tracepoint of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstAttached {
    Perf,
    Jitterscope,
}

impl FirstAttached {
    pub fn other(self) -> FirstAttached {
        match self {
            FirstAttached::Perf => FirstAttached::Jitterscope,
            FirstAttached::Jitterscope => FirstAttached::Perf,
        }
    }
}

impl Tolerances {
    /// The allowance for the handlers of `pieces` of perf's, under perf's time (perf first)
    /// and over it (jitterscope first).
    fn handlers(&self, pieces: u64) -> (Nanos, Nanos) {
        let a = pieces.saturating_mul(self.handler_ns);
        match self.first {
            Some(FirstAttached::Perf) => (a, 0),
            Some(FirstAttached::Jitterscope) => (0, a),
            None => (0, 0),
        }
    }

    /// The tolerance of a class; None for classes perf has no counterpart of.
    pub fn of(&self, class: CulpritClass) -> Option<f64> {
        match class {
            CulpritClass::TimerTick => Some(self.local_timer),
            CulpritClass::Kworker
            | CulpritClass::Kthread
            | CulpritClass::Task
            | CulpritClass::SelfNoise
            | CulpritClass::Irq
            | CulpritClass::Softirq
            | CulpritClass::Ipi
            | CulpritClass::Nmi => Some(self.task_and_irq),
            // perf records no fault durations (the check does not record them).
            CulpritClass::Fault => None,
            // perf's idle time is not told apart from a held-off thread's.
            CulpritClass::Throttled => None,
            // No duration (a frequency change) or no kernel record at all.
            CulpritClass::FreqChange
            | CulpritClass::Hypervisor
            | CulpritClass::Unexplained
            | CulpritClass::Lost => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    Within,
    Outside,
    /// Under the floor in both: listed, not graded.
    BelowFloor,
    /// perf cannot record this cause's episodes (irq_work's exit).
    NotRecordable,
    /// Outside the tolerance of what perf attributed, but perf lost switches of this task:
    /// with the unknown time it was involved in, perf's figure is a range that holds
    /// jitterscope's. Not graded either way — perf cannot tell.
    Uncertain,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub class: CulpritClass,
    /// Work functions (kworkers), handlers (NMIs), as either recorder saw them.
    pub details: Vec<String>,
    /// jitterscope's time as perf can see it: measured, plus `js_host_ns`.
    pub js_ns: Nanos,
    /// Steal inside the cause's runs that jitterscope gave to `hypervisor`.
    pub js_host_ns: Nanos,
    pub perf_ns: Nanos,
    /// perf's time of unknown owner in intervals this task opened or closed.
    pub perf_unknown_ns: Nanos,
    /// The pieces perf's time adds up (`perf::PerfCause::pieces`).
    pub perf_pieces: u64,
    pub tolerance: f64,
    /// What the handlers of the attach order may take off jitterscope's time (perf first)
    /// and add to it (jitterscope first), beyond the tolerance (`Tolerances::handler_ns`).
    pub handlers_under_ns: Nanos,
    pub handlers_over_ns: Nanos,
    pub grade: Grade,
}

impl Row {
    /// perf measured this cause whole: the overall agreement counts it.
    pub fn perf_measured(&self) -> bool {
        match self.grade {
            Grade::Within | Grade::Outside | Grade::BelowFloor => true,
            Grade::NotRecordable | Grade::Uncertain => false,
        }
    }

    pub fn ratio(&self) -> Option<f64> {
        (self.perf_ns > 0).then(|| self.js_ns as f64 / self.perf_ns as f64)
    }

    /// The tolerance as the table shows it: `±5%`, and the handlers' allowance on its side
    /// (`±5% − 420.0µs`).
    pub fn tolerance_text(&self) -> String {
        match (self.handlers_under_ns, self.handlers_over_ns) {
            (0, 0) => pct(self.tolerance),
            (under, 0) => format!("{} − {}", pct(self.tolerance), fmt_ns(under)),
            (_, over) => format!("{} + {}", pct(self.tolerance), fmt_ns(over)),
        }
    }

    /// jitterscope's time lies within the tolerance and the handlers' allowance of perf's,
    /// whether or not the cause is large enough to be graded.
    pub fn within_bounds(&self) -> bool {
        let (least, most) = bounds(
            self.perf_ns,
            self.tolerance,
            (self.handlers_under_ns, self.handlers_over_ns),
        );
        (least..=most).contains(&(self.js_ns as f64))
    }

    /// |jitterscope − perf| beyond what the attach order's handlers explain.
    pub fn beyond_handlers(&self) -> Nanos {
        if self.js_ns < self.perf_ns {
            (self.perf_ns - self.js_ns).saturating_sub(self.handlers_under_ns)
        } else {
            (self.js_ns - self.perf_ns).saturating_sub(self.handlers_over_ns)
        }
    }
}

/// The comparison on one CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub cpu: u32,
    pub label: String,
    pub schema: String,
    pub from_ns: Nanos,
    pub duration_ns: Nanos,
    pub stall_threshold_ns: Nanos,
    pub tolerances: Tolerances,
    /// Largest first.
    pub rows: Vec<Row>,
    /// jitterscope's rows perf has no counterpart of (class as written, name, ns).
    pub not_compared: Vec<(String, String, Nanos)>,
    pub unknown_ns: Nanos,
    pub unknown_intervals: u64,
    pub unknown_owners: Vec<String>,
    pub unpaired: u64,
    pub covered: bool,
    pub perf_first_ns: Nanos,
    pub perf_last_ns: Nanos,
    pub agreement: f64,
}

/// Joins jitterscope's rows and perf's causes by name and grades each.
pub fn compare(js: &Measured, perf: &NetDurations, tol: &Tolerances) -> Comparison {
    let (by_name, not_compared) = js_by_name(js, tol);
    let joined = join_perf(&by_name, perf);
    let rows = grade_rows(joined, tol);
    let agreement = agreement(&rows);
    Comparison {
        cpu: perf.cpu,
        label: js.label.clone(),
        schema: js.schema.clone(),
        from_ns: js.record_from_ns,
        duration_ns: js.duration_ns,
        stall_threshold_ns: js.stall_threshold_ns,
        tolerances: tol.clone(),
        rows,
        not_compared,
        unknown_ns: perf.unknown_ns,
        unknown_intervals: perf.unknown_intervals,
        unknown_owners: perf.unknown_owners.iter().cloned().collect(),
        unpaired: perf.unpaired,
        covered: perf.covers_window(tol.coverage_slack_ns),
        perf_first_ns: perf.first_event_ns,
        perf_last_ns: perf.last_event_ns,
        agreement,
    }
}

/// One cause as jitterscope measured it.
struct Side {
    class: Option<CulpritClass>,
    ns: Nanos,
    host_ns: Nanos,
    details: BTreeSet<String>,
}

/// One cause as both recorders saw it.
#[derive(Default)]
struct Joined {
    class: Option<CulpritClass>,
    js_ns: Nanos,
    js_host_ns: Nanos,
    perf_ns: Nanos,
    perf_pieces: u64,
    unknown_ns: Nanos,
    details: BTreeSet<String>,
}

/// jitterscope's rows perf has no counterpart of: class as written, name, ns.
type NotCompared = Vec<(String, String, Nanos)>;

/// jitterscope's time by name, and its rows perf has no counterpart of.
fn js_by_name(js: &Measured, tol: &Tolerances) -> (BTreeMap<String, Side>, NotCompared) {
    // The rows of one cause (the tick's several details, a kworker's work functions, a
    // `self` row of the same name) add up.
    let mut by_name: BTreeMap<String, Side> = BTreeMap::new();
    let mut not_compared = Vec::new();
    for r in &js.rows {
        let comparable = r.class.and_then(|c| tol.of(c)).is_some();
        if !comparable {
            not_compared.push((r.class_text.clone(), r.name.clone(), r.ns));
            continue;
        }
        // jitterscope's own IPIs (`self`, by their vector) are perf's vector rows.
        let name = match &r.vector {
            Some(vector) if r.class == Some(CulpritClass::SelfNoise) => vector.as_str(),
            _ => r.name.as_str(),
        };
        let side = by_name.entry(name.to_string()).or_insert(Side {
            class: None,
            ns: 0,
            host_ns: 0,
            details: BTreeSet::new(),
        });
        side.ns += r.ns;
        side.host_ns += r.host_ns;
        // The class of the cause itself, not of a `self` row that shares its name.
        if side.class.is_none() || side.class == Some(CulpritClass::SelfNoise) {
            side.class = r.class;
        }
        if !r.detail.is_empty() {
            side.details.insert(r.detail.clone());
        }
    }
    (by_name, not_compared)
}

/// perf's `comm[pid]` → `comm`: perf's text names a task so (jitterscope's side is joined
/// by its rows as written, and by typed keys where words would not match).
fn perf_comm(name: &str) -> &str {
    match name.rfind('[') {
        Some(i) if name.ends_with(']') => &name[..i],
        _ => name,
    }
}

/// The name under which perf's cause `name` joins jitterscope's rows.
fn join_key(by_name: &BTreeMap<String, Side>, name: &str) -> String {
    // perf's `comm[pid]` joins jitterscope's row of that name, else of the comm alone (kernel
    // threads are named so, and the row of a command name's processes), else `comm[*]` (older
    // run files' row of folded pids).
    let folded = format!("{}[*]", perf_comm(name));
    if by_name.contains_key(name) {
        name.to_string()
    } else if by_name.contains_key(perf_comm(name)) {
        perf_comm(name).to_string()
    } else if name != perf_comm(name) && by_name.contains_key(&folded) {
        folded
    } else {
        name.to_string()
    }
}

/// jitterscope's causes with perf's time, class, details and unknown time joined in.
fn join_perf(by_name: &BTreeMap<String, Side>, perf: &NetDurations) -> BTreeMap<String, Joined> {
    let mut joined: BTreeMap<String, Joined> = by_name
        .iter()
        .map(|(n, s)| {
            let j = Joined {
                class: s.class,
                js_ns: s.ns + s.host_ns,
                js_host_ns: s.host_ns,
                details: s.details.clone(),
                ..Joined::default()
            };
            (n.clone(), j)
        })
        .collect();
    for c in perf.causes.values() {
        let e = joined.entry(join_key(by_name, &c.name)).or_default();
        e.perf_ns += c.ns;
        e.perf_pieces += c.pieces;
        // perf knows a vector or IRQ for sure; a task's kind only jitterscope knows.
        if e.class.is_none() || c.class != CulpritClass::Task {
            e.class = Some(c.class);
        }
        e.details.extend(c.details.iter().cloned());
    }
    for (name, ns) in &perf.unknown_involving {
        if let Some(e) = joined.get_mut(&join_key(by_name, name)) {
            e.unknown_ns += ns;
        }
    }
    joined
}

/// A row per joined cause of a class with a tolerance, graded, largest first.
fn grade_rows(joined: BTreeMap<String, Joined>, tol: &Tolerances) -> Vec<Row> {
    let unrecordable: Vec<&str> = Vector::ALL
        .iter()
        .filter(|v| !v.recordable_by_perf())
        .map(|v| v.name())
        .collect();
    let mut rows: Vec<Row> = joined
        .into_iter()
        .filter_map(|(name, j)| {
            let class = j.class?;
            let tolerance = tol.of(class)?;
            let (under, over) = tol.handlers(j.perf_pieces);
            let grade = if unrecordable.contains(&name.as_str()) {
                Grade::NotRecordable
            } else {
                grade_of(&j, tolerance, (under, over), tol.floor_ns)
            };
            Some(Row {
                name,
                class,
                details: j.details.into_iter().collect(),
                js_ns: j.js_ns,
                js_host_ns: j.js_host_ns,
                perf_ns: j.perf_ns,
                perf_unknown_ns: j.unknown_ns,
                perf_pieces: j.perf_pieces,
                tolerance,
                handlers_under_ns: under,
                handlers_over_ns: over,
                grade,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        b.js_ns
            .max(b.perf_ns)
            .cmp(&a.js_ns.max(a.perf_ns))
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// The grade of a cause perf can record: within `tolerance` of perf's time, widened on the
/// attach order's side by the handlers' allowance (`under`, `over`).
fn grade_of(j: &Joined, tolerance: f64, handlers: (Nanos, Nanos), floor_ns: Nanos) -> Grade {
    let js = j.js_ns as f64;
    let (least, most) = bounds(j.perf_ns, tolerance, handlers);
    let (_, most_unknown) = bounds(j.perf_ns + j.unknown_ns, tolerance, handlers);
    if j.js_ns.max(j.perf_ns) < floor_ns {
        Grade::BelowFloor
    } else if (least..=most).contains(&js) {
        Grade::Within
    } else if (least..=most_unknown).contains(&js) {
        Grade::Uncertain
    } else {
        Grade::Outside
    }
}

/// The least and most jitterscope's time may be against perf's `perf_ns`: within `tolerance`,
/// widened by the handlers' allowance (`under`, `over`).
fn bounds(perf_ns: Nanos, tolerance: f64, (under, over): (Nanos, Nanos)) -> (f64, f64) {
    let perf = perf_ns as f64;
    (
        perf * (1.0 - tolerance) - under as f64,
        perf * (1.0 + tolerance) + over as f64,
    )
}

/// `1 − Σ|js − perf| / (2 Σ perf)` over the causes perf measured whole, each difference
/// less the handlers' allowance on its side.
fn agreement(rows: &[Row]) -> f64 {
    let compared = rows.iter().filter(|r| r.perf_measured());
    let (diff, total) = compared.fold((0u64, 0u64), |(d, t), r| {
        (d + r.beyond_handlers(), t + r.perf_ns)
    });
    if total == 0 {
        if diff == 0 {
            1.0
        } else {
            0.0
        }
    } else {
        1.0 - diff as f64 / (2.0 * total as f64)
    }
}

/// Causes under the floor the table lists by default (the largest); the rest are summed up.
pub const UNGRADED_ROWS: usize = 12;

fn ms(ns: Nanos) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn pct(x: f64) -> String {
    format!("±{:.0}%", x * 100.0)
}

impl Comparison {
    /// Why the check fails; empty when it passes.
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self.coverage_failure().into_iter().collect();
        for r in self.rows.iter().filter(|r| r.grade == Grade::Outside) {
            f.push(format!(
                "{}: jitterscope {} ms, perf {} ms ({}), outside {}",
                r.name,
                ms(r.js_ns),
                ms(r.perf_ns),
                r.ratio()
                    .map_or("perf saw none".to_string(), |q| format!("{q:.2}×")),
                r.tolerance_text()
            ));
        }
        f.extend(self.agreement_failure());
        f
    }

    fn coverage_failure(&self) -> Option<String> {
        (!self.covered).then(|| {
            format!(
                "perf's events on CPU {} run from {} to {} ns, not over the whole recorded window {} to {} ns: start perf before jitterscope and stop it after",
                self.cpu,
                self.perf_first_ns,
                self.perf_last_ns,
                self.from_ns,
                self.from_ns + self.duration_ns
            )
        })
    }

    fn agreement_failure(&self) -> Option<String> {
        (self.agreement < self.tolerances.agreement).then(|| {
            format!(
                "overall agreement {:.3} is under {:.2}",
                self.agreement, self.tolerances.agreement
            )
        })
    }

    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// Graded rows (for callers that assert on particular causes).
    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The comparison as Markdown: a table per cause, then the unknown time, what was not
    /// compared, the overall agreement and the verdict.
    pub fn to_markdown(&self) -> String {
        self.render(Some(UNGRADED_ROWS))
    }

    /// As `to_markdown`, every cause in the table.
    pub fn to_markdown_all(&self) -> String {
        self.render(None)
    }

    /// The table lists the causes under the floor up to `ungraded` of them (the largest),
    /// then sums up the rest.
    fn render(&self, ungraded: Option<usize>) -> String {
        let mut s = String::new();
        self.write_header(&mut s);
        self.write_table(&mut s, ungraded);
        s.push('\n');
        self.write_notes(&mut s);
        self.write_agreement(&mut s);
        self.write_verdict(&mut s);
        s
    }

    fn write_header(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "### CPU {}: jitterscope against perf (run `{}`, {}, {} recorded from {} ns)\n",
            self.cpu,
            self.label,
            self.schema,
            fmt_ns(self.duration_ns),
            self.from_ns
        );
    }

    /// A line per cause; past `ungraded` causes under the floor, one line sums up the rest.
    fn write_table(&self, s: &mut String, ungraded: Option<usize>) {
        let floor_ns = self.tolerances.floor_ns;
        s.push_str("| cause | class | jitterscope ms | perf ms | ratio | tolerance | within |\n");
        s.push_str("|---|---|---:|---:|---:|---:|---|\n");
        let mut small = 0;
        let (mut rest, mut rest_js, mut rest_perf) = (0, 0, 0);
        for r in &self.rows {
            if r.grade == Grade::BelowFloor {
                small += 1;
                if ungraded.is_some_and(|n| small > n) {
                    rest += 1;
                    rest_js += r.js_ns;
                    rest_perf += r.perf_ns;
                    continue;
                }
            }
            write_table_row(s, r, floor_ns);
        }
        if rest > 0 {
            let _ = writeln!(
                s,
                "| … {rest} more causes under {} ms in both | | {} | {} | | | not graded (`--all` lists them) |",
                ms(floor_ns),
                ms(rest_js),
                ms(rest_perf)
            );
        }
    }

    /// perf's time of unknown owner, its unpaired episodes and what was not compared.
    fn write_notes(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "- perf time of unknown owner: {} ms in {} interval(s) whose closing switch named another task than the one switched in (perf lost a switch){}; not compared, never given to a task",
            ms(self.unknown_ns),
            self.unknown_intervals,
            if self.unknown_owners.is_empty() {
                String::new()
            } else {
                format!(": {}", self.unknown_owners.join(", "))
            }
        );
        if self.unpaired > 0 {
            let _ = writeln!(
                s,
                "- perf episodes without their entry or exit (at the recording's edges or lost): {}",
                self.unpaired
            );
        }
        let host: Nanos = self.rows.iter().map(|r| r.js_host_ns).sum();
        if host > 0 {
            let causes: Vec<&str> = self
                .rows
                .iter()
                .filter(|r| r.js_host_ns > 0)
                .map(|r| r.name.as_str())
                .collect();
            let _ = writeln!(
                s,
                "- host preemption inside runs: {} ms of steal lay inside runs of {} and is jitterscope's `hypervisor` time; perf sees such a run whole, so it is added back to those causes here (`+ host`)",
                ms(host),
                causes.join(", ")
            );
        }
        if !self.not_compared.is_empty() {
            let hypervisor = CulpritClass::Hypervisor.as_str();
            let list: Vec<String> = self
                .not_compared
                .iter()
                .map(|(c, n, ns)| {
                    if c == hypervisor && host > 0 {
                        let outside = ns.saturating_sub(host);
                        format!(
                            "{c} {n} {} ms outside runs (+ {} ms inside them, compared above)",
                            ms(outside),
                            ms(ns - outside)
                        )
                    } else {
                        format!("{c} {n} {} ms", ms(*ns))
                    }
                })
                .collect();
            let _ = writeln!(
                s,
                "- jitterscope time with no perf counterpart (no kernel record): {}",
                list.join(", ")
            );
        }
    }

    /// The overall agreement and the tolerances it was graded by.
    fn write_agreement(&self, s: &mut String) {
        let t = &self.tolerances;
        let counted = self.rows.iter().filter(|r| r.perf_measured()).count();
        let _ = writeln!(
            s,
            "- overall agreement: {:.3} (1 − Σ|js − perf| / 2 Σ perf over the {counted} causes perf measured whole; at least {:.2}) {}",
            self.agreement,
            t.agreement,
            if self.agreement >= t.agreement { "✓" } else { "✗" }
        );
        let _ = writeln!(
            s,
            "- tolerances: task-level and IRQ-level causes {}, the local timer {}; causes under {} ms in both are listed, not graded; jitterscope counts interruptions that stalled the spinning thread (over {})",
            pct(t.task_and_irq),
            pct(t.local_timer),
            ms(t.floor_ns),
            fmt_ns(self.stall_threshold_ns)
        );
        let handlers = match t.first {
            None => "not given (`--order`): no allowance for the tracers' handlers".to_string(),
            Some(FirstAttached::Perf) => format!("perf first: jitterscope, attached second, may see each of perf's pieces of a cause up to {} shorter (the tolerance's −)", fmt_ns(t.handler_ns)),
            Some(FirstAttached::Jitterscope) => format!("jitterscope first: perf, attached second, may see each of its pieces of a cause up to {} shorter (the tolerance's +)", fmt_ns(t.handler_ns)),
        };
        let _ = writeln!(s, "- attach order: {handlers}");
    }

    fn write_verdict(&self, s: &mut String) {
        let failures = self.failures();
        if failures.is_empty() {
            let graded = self
                .rows
                .iter()
                .filter(|r| matches!(r.grade, Grade::Within))
                .count();
            let _ = writeln!(
                s,
                "\n**verdict: PASS** — {graded} graded causes within tolerance on CPU {}",
                self.cpu
            );
        } else {
            let _ = writeln!(s, "\n**verdict: FAIL** — {}", failures.join("; "));
        }
    }
}

/// One cause's line of the table.
fn write_table_row(s: &mut String, r: &Row, floor_ns: Nanos) {
    let mut cause = r.name.replace('|', "\\|");
    if !r.details.is_empty() && r.class == CulpritClass::Kworker {
        // The work it ran: the cause is the worker's whole run.
        let _ = write!(cause, " ({})", r.details.join(", ").replace('|', "\\|"));
    }
    let ratio = r.ratio().map_or("–".to_string(), |q| format!("{q:.3}"));
    let (perf, ratio) = match r.grade {
        Grade::NotRecordable => ("–".to_string(), "–".to_string()),
        _ if r.perf_unknown_ns > 0 => (
            format!("{} (+ ≤ {} unknown)", ms(r.perf_ns), ms(r.perf_unknown_ns)),
            ratio,
        ),
        _ => (ms(r.perf_ns), ratio),
    };
    let within = match r.grade {
        Grade::Within => "✓".to_string(),
        Grade::Outside => "✗".to_string(),
        Grade::BelowFloor => format!("not graded (under {} ms)", ms(floor_ns)),
        Grade::NotRecordable => "not graded (perf cannot record its exit)".to_string(),
        Grade::Uncertain => {
            "not graded (perf lost this task's switches; within perf's range)".to_string()
        }
    };
    let js = if r.js_host_ns > 0 {
        format!(
            "{} ({} + {} host)",
            ms(r.js_ns),
            ms(r.js_ns - r.js_host_ns),
            ms(r.js_host_ns)
        )
    } else {
        ms(r.js_ns)
    };
    let _ = writeln!(
        s,
        "| {cause} | {} | {js} | {perf} | {ratio} | {} | {within} |",
        r.class,
        r.tolerance_text()
    );
}

/// One cause outside its tolerance in one attach order, and how it stood in the other.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedRow {
    pub name: String,
    pub tolerance: f64,
    /// jitterscope's time against perf's with perf attached first at each tracepoint, and
    /// with jitterscope attached first (None: perf did not measure the cause whole in that
    /// recording, or saw none of it).
    pub perf_first: Option<f64>,
    pub js_first: Option<f64>,
    /// The two ratios lie on the sides the attach order puts them and between them reach
    /// the tolerance: the difference is the two tracers' handlers, not the attribution.
    pub bracketed: bool,
}

/// The same scenario recorded twice, perf attached first at each tracepoint in `perf_first`
/// and jitterscope first in `js_first`. Two tracers on one tracepoint run one after the
/// other, and the second takes its timestamps after the first one's handler, which costs more
/// at an episode's entry than at its exit: the tracer attached second sees each episode
/// shorter, by a few hundred ns, whichever it is. For episodes of a µs or so that is more than
/// the tolerance, and it moves the ratio down with perf first and up with jitterscope first.
/// A cause outside its tolerance in one order is therefore accepted when, in the other, it
/// lies on the other side, and the two ratios reach the tolerance between them (perf first ≤
/// 1 + t, jitterscope first ≥ 1 − t, the first no larger than the second): the true ratio
/// lies between them; and neither lies further from 1 than the handlers' bias
/// (`Tolerances::order_bias`). An error of the attribution larger than the handlers'
/// difference moves both ratios the same way, or one of them past the bias, and still fails.
/// The overall agreement is held across the orders in the same spirit
/// (`agreement_failures_across`); perf's coverage of either recording stays a failure.
pub fn across_orders(
    perf_first: &Comparison,
    js_first: &Comparison,
) -> (Vec<OrderedRow>, Vec<String>) {
    // A cause under the floor in the other order still says which side it lies on.
    let graded = |c: &Comparison, name: &str| {
        c.row(name)
            .filter(|r| r.perf_measured())
            .and_then(Row::ratio)
    };
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (c, order) in [(perf_first, "perf first"), (js_first, "jitterscope first")] {
        failures.extend(c.coverage_failure().map(|f| format!("{order}: {f}")));
    }
    failures.extend(agreement_failures_across(perf_first, js_first));
    let mut outside: Vec<(&str, f64)> = Vec::new();
    for r in perf_first.rows.iter().chain(&js_first.rows) {
        if r.grade == Grade::Outside && !outside.iter().any(|(n, _)| *n == r.name) {
            outside.push((&r.name, r.tolerance));
        }
    }
    for (name, t) in outside {
        let (pf, jf) = (graded(perf_first, name), graded(js_first, name));
        let bracketed = match (pf, jf) {
            (Some(pf), Some(jf)) => bracketed(pf, jf, t, perf_first.tolerances.order_bias),
            _ => false,
        };
        if !bracketed {
            let show = |q: Option<f64>| q.map_or("no ratio".to_string(), |q| format!("{q:.2}×"));
            failures.push(format!(
                "{name}: {} with perf first, {} with jitterscope first, outside {} and not between the two orders",
                show(pf),
                show(jf),
                pct(t)
            ));
        }
        rows.push(OrderedRow {
            name: name.to_string(),
            tolerance: t,
            perf_first: pf,
            js_first: jf,
            bracketed,
        });
    }
    (rows, failures)
}

/// The overall agreement of the two recordings together. Each attach order moves every short
/// episode the same way (`Tolerances::order_bias`: jitterscope under perf with perf first,
/// over it with jitterscope first), so a single order's agreement carries the handlers' bias
/// of all its short causes at once. The bias cancels when each cause's time is added up over
/// both recordings: that sum is held to `Tolerances::agreement`. Each single order is held
/// only in the direction its bias does not explain: with perf first, jitterscope's time over
/// perf's; with jitterscope first, its time under perf's; each to the same figure.
fn agreement_failures_across(perf_first: &Comparison, js_first: &Comparison) -> Vec<String> {
    let mut sums: BTreeMap<&str, (Nanos, Nanos)> = BTreeMap::new();
    for c in [perf_first, js_first] {
        for r in c.rows.iter().filter(|r| r.perf_measured()) {
            let e = sums.entry(&r.name).or_default();
            e.0 += r.js_ns;
            e.1 += r.perf_ns;
        }
    }
    let share = |diff: Nanos, total: Nanos| match (diff, total) {
        (0, _) => 1.0,
        (_, 0) => 0.0,
        _ => 1.0 - diff as f64 / (2.0 * total as f64),
    };
    let least = perf_first.tolerances.agreement;
    let mut failures = Vec::new();
    let (diff, total) = sums
        .values()
        .fold((0, 0), |(d, t), &(j, p)| (d + j.abs_diff(p), t + p));
    let both = share(diff, total);
    if both < least {
        failures.push(format!(
            "overall agreement of both orders together {both:.3} is under {least:.2}"
        ));
    }
    let one_sided = |c: &Comparison, over: bool| {
        let compared = c.rows.iter().filter(|r| r.perf_measured());
        let (d, t) = compared.fold((0, 0), |(d, t), r| {
            let e = if over {
                r.js_ns.saturating_sub(r.perf_ns)
            } else {
                r.perf_ns.saturating_sub(r.js_ns)
            };
            (d + e, t + r.perf_ns)
        });
        share(d, t)
    };
    for (c, over, order, side) in [
        (perf_first, true, "perf first", "over"),
        (js_first, false, "jitterscope first", "under"),
    ] {
        let a = one_sided(c, over);
        if a < least {
            failures.push(format!(
                "{order}: overall agreement counting only jitterscope's time {side} perf's {a:.3} is under {least:.2}"
            ));
        }
    }
    failures
}

/// Both orders bounded on both sides: perf first in `[1 − b, 1 + t]`, jitterscope first in
/// `[1 − t, 1 + b]` (b the handlers' bias, t the cause's tolerance), the first no larger
/// than the second — the true ratio lies between them.
fn bracketed(pf: f64, jf: f64, t: f64, b: f64) -> bool {
    let b = b.max(t);
    pf <= jf && (1.0 - b..=1.0 + t).contains(&pf) && (1.0 - t..=1.0 + b).contains(&jf)
}

/// The causes outside their tolerance in either order (`across_orders`), as a Markdown
/// section, and the verdict of the two recordings together.
pub fn across_orders_markdown(rows: &[OrderedRow], failures: &[String]) -> String {
    let mut s = String::from("#### both attach orders\n\n");
    if rows.is_empty() {
        s.push_str("Every graded cause was within its tolerance in both orders.\n");
    } else {
        s.push_str("| cause | perf first | jitterscope first | tolerance | between the orders |\n|---|---:|---:|---:|---|\n");
        for r in rows {
            let show = |q: Option<f64>| q.map_or("–".to_string(), |q| format!("{q:.3}"));
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                r.name,
                show(r.perf_first),
                show(r.js_first),
                pct(r.tolerance),
                if r.bracketed {
                    "✓ (the handlers' difference)"
                } else {
                    "✗"
                }
            ));
        }
    }
    s.push('\n');
    if failures.is_empty() {
        s.push_str("**verdict: PASS** (both attach orders)\n");
    } else {
        s.push_str(&format!(
            "**verdict: FAIL** (both attach orders) — {}\n",
            failures.join("; ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::measured::MeasuredRow;
    use crate::verify::perf::PerfCause;

    fn js_row(class: CulpritClass, name: &str, detail: &str, ns: Nanos) -> MeasuredRow {
        MeasuredRow {
            class: Some(class),
            class_text: class.as_str().into(),
            name: name.into(),
            detail: detail.into(),
            ns,
            host_ns: 0,
            vector: None,
        }
    }

    fn measured(rows: Vec<MeasuredRow>) -> Measured {
        Measured {
            schema: "jitterscope.run/1".into(),
            label: "t".into(),
            record_from_ns: 1_000_000_000,
            duration_ns: 10_000_000_000,
            consumer_cpus: vec![1],
            stall_threshold_ns: 1_000,
            rows,
        }
    }

    fn perf(causes: &[(CulpritClass, &str, Nanos)], unknown_ns: Nanos) -> NetDurations {
        NetDurations {
            cpu: 1,
            from_ns: 1_000_000_000,
            to_ns: 11_000_000_000,
            causes: causes
                .iter()
                .map(|&(class, name, ns)| {
                    (
                        name.to_string(),
                        PerfCause {
                            class,
                            name: name.into(),
                            ns,
                            pieces: ns / 2_000,
                            details: BTreeSet::new(),
                        },
                    )
                })
                .collect(),
            unknown_ns,
            unknown_intervals: u64::from(unknown_ns > 0),
            first_event_ns: 999_000_000,
            last_event_ns: 11_001_000_000,
            ..NetDurations::default()
        }
    }

    const MS: Nanos = 1_000_000;

    /// A recording where `SCHED` came to `js` against perf's `perf` (ns), beside a large
    /// cause both agree on.
    fn sched_recording(js: Nanos, perf_ns: Nanos) -> Comparison {
        let j = measured(vec![
            js_row(CulpritClass::Softirq, "SCHED", "", js),
            js_row(CulpritClass::Kthread, "kdamond.0", "", 40 * MS),
        ]);
        let p = perf(
            &[
                (CulpritClass::Softirq, "SCHED", perf_ns),
                (CulpritClass::Task, "kdamond.0[77]", 40 * MS),
            ],
            0,
        );
        compare(&j, &p, &Tolerances::default())
    }

    #[test]
    fn a_short_cause_on_either_side_of_perf_by_attach_order_passes_across_the_orders() {
        // verify.sh on 2026-11-25: SCHED 0.93–0.95× with perf first, 1.05–1.06× with
        // jitterscope first.
        let pf = sched_recording(1_140_000, 1_210_000);
        let jf = sched_recording(1_470_000, 1_390_000);
        assert!(!pf.passed() && !jf.passed(), "each order alone fails");
        let (rows, failures) = across_orders(&pf, &jf);
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].bracketed && rows[0].name == "SCHED");
        let md = across_orders_markdown(&rows, &failures);
        assert!(md.contains("| SCHED | 0.942 | 1.058 | ±5% | ✓"), "{md}");
        assert!(
            md.contains("**verdict: PASS** (both attach orders)"),
            "{md}"
        );
        // Within in one order, outside on its own side in the other: also between them.
        let (_, failures) = across_orders(&sched_recording(1_200_000, 1_210_000), &jf);
        assert!(failures.is_empty(), "{failures:?}");
    }

    #[test]
    fn an_attribution_error_larger_than_the_handlers_fails_across_the_orders() {
        // jitterscope short by a fifth in both orders: both ratios under 1 − t.
        let (rows, failures) = across_orders(
            &sched_recording(800_000, 1_000_000),
            &sched_recording(850_000, 1_000_000),
        );
        assert!(!rows[0].bracketed);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].starts_with("SCHED: 0.80× with perf first, 0.85× with jitterscope first"),
            "{failures:?}"
        );
        // Too much in both orders.
        let (_, failures) = across_orders(
            &sched_recording(1_200_000, 1_000_000),
            &sched_recording(1_300_000, 1_000_000),
        );
        assert_eq!(failures.len(), 1, "{failures:?}");
        // On the sides the attach order does not put them: not the handlers.
        let (rows, failures) = across_orders(
            &sched_recording(1_100_000, 1_000_000),
            &sched_recording(900_000, 1_000_000),
        );
        assert!(!rows[0].bracketed && failures.len() == 1, "{failures:?}");
        // Under the floor in the other order, its ratio still counts.
        let (rows, failures) = across_orders(
            &sched_recording(1_140_000, 1_210_000),
            &sched_recording(900_000, 850_000),
        );
        assert!(rows[0].bracketed && failures.is_empty(), "{failures:?}");
        // 0.6 in one order and 1.0 in the other: past the handlers' bias on its side.
        let (rows, failures) = across_orders(
            &sched_recording(600_000, 1_000_000),
            &sched_recording(1_000_000, 1_000_000),
        );
        assert!(!rows[0].bracketed && failures.len() == 1, "{failures:?}");
        assert!(
            failures[0].starts_with("SCHED: 0.60× with perf first, 1.00× with jitterscope first"),
            "{failures:?}"
        );
        // And 1.0 against 1.6 the other way.
        let (rows, failures) = across_orders(
            &sched_recording(1_000_000, 1_000_000),
            &sched_recording(1_600_000, 1_000_000),
        );
        assert!(!rows[0].bracketed && failures.len() == 1, "{failures:?}");
        // perf saw none of it in the other order: nothing to bracket with.
        let (rows, failures) = across_orders(
            &sched_recording(1_140_000, 1_210_000),
            &sched_recording(900_000, 0),
        );
        assert_eq!(rows[0].js_first, None);
        assert!(
            failures[0].contains("no ratio with jitterscope first"),
            "{failures:?}"
        );
    }

    #[test]
    fn the_overall_agreement_across_the_orders_cancels_the_handlers_bias_only() {
        // SCHED at 0.75× with perf first and 1.25× with jitterscope first, 40 ms of 80: each
        // order alone is at 0.94, both together at 1.
        let pf = sched_recording(30 * MS, 40 * MS);
        let jf = sched_recording(50 * MS, 40 * MS);
        assert!(pf.agreement < 0.97 && jf.agreement < 0.97);
        let (rows, failures) = across_orders(&pf, &jf);
        assert!(rows[0].bracketed && failures.is_empty(), "{failures:?}");
        // The same error on the sides the orders do not explain: each single order fails.
        let (_, failures) = across_orders(&jf, &pf);
        assert!(
            failures.iter().any(|f| f.starts_with(
                "perf first: overall agreement counting only jitterscope's time over perf's 0.938"
            )),
            "{failures:?}"
        );
        assert!(
            failures.iter().any(|f| f.starts_with(
                "jitterscope first: overall agreement counting only jitterscope's time under perf's 0.938"
            )),
            "{failures:?}"
        );
        // Short by a fifth in both orders: the sum does not cancel.
        let (_, failures) = across_orders(
            &sched_recording(30 * MS, 40 * MS),
            &sched_recording(30 * MS, 40 * MS),
        );
        assert!(
            failures
                .iter()
                .any(|f| f.starts_with("overall agreement of both orders together 0.938")),
            "{failures:?}"
        );
    }

    #[test]
    fn a_recordings_own_failures_stay_across_the_orders() {
        let good = sched_recording(1_200_000, 1_210_000);
        let mut short = good.clone();
        short.covered = false;
        let (rows, failures) = across_orders(&good, &short);
        assert!(rows.is_empty());
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].starts_with("jitterscope first: perf's events on CPU 1"),
            "{failures:?}"
        );
        let md = across_orders_markdown(&rows, &failures);
        assert!(md.contains("Every graded cause was within its tolerance in both orders."));
        assert!(
            md.contains("**verdict: FAIL** (both attach orders)"),
            "{md}"
        );
    }

    #[test]
    fn the_issue_figures_fail_on_the_tick_and_the_agreement() {
        // The quiet run the issue measured: the tick credited with ≤ 20 µs pieces next to it.
        let js = measured(vec![
            js_row(CulpritClass::TimerTick, "local timer", "", 62_100_000),
            js_row(CulpritClass::Kthread, "kdamond.0", "", 82_400_000),
            js_row(CulpritClass::Unexplained, "no kernel event", "", 20 * MS),
        ]);
        let p = perf(
            &[
                (CulpritClass::TimerTick, "local timer", 40_900_000),
                (CulpritClass::Task, "kdamond.0[77]", 82_200_000),
            ],
            0,
        );
        let c = compare(&js, &p, &Tolerances::default());
        let tick = c.row("local timer").unwrap();
        assert_eq!(tick.grade, Grade::Outside);
        assert!((tick.ratio().unwrap() - 1.518).abs() < 0.001);
        // kdamond.0 (a kthread, named by comm) joins perf's kdamond.0[77].
        let k = c.row("kdamond.0").unwrap();
        assert_eq!((k.class, k.grade), (CulpritClass::Kthread, Grade::Within));
        assert_eq!(c.not_compared.len(), 1);
        let f = c.failures();
        // The tick's error alone takes the overall agreement under 0.97.
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0]
            .starts_with("local timer: jitterscope 62.10 ms, perf 40.90 ms (1.52×), outside ±5%"));
        assert_eq!(f[1], "overall agreement 0.913 is under 0.97");
        // 1 − (21.2 + 0.2) / (2 × 123.1)
        assert!(
            (c.agreement - (1.0 - 21.4 / 246.2)).abs() < 1e-3,
            "{}",
            c.agreement
        );
        let md = c.to_markdown();
        assert!(
            md.contains("| local timer | timer_tick | 62.10 | 40.90 | 1.518 | ±5% | ✗ |"),
            "{md}"
        );
        assert!(md.contains("**verdict: FAIL**"), "{md}");
    }

    #[test]
    fn steal_inside_a_kworkers_run_is_added_back_to_it() {
        // The CI run in which kworker/1:1 was 0.90× of perf's: the host held the vCPU for
        // 0.78 ms inside its runs, which jitterscope gives to `hypervisor`.
        let mut kworker = js_row(
            CulpritClass::Kworker,
            "kworker/1:1",
            "vmstat_update",
            7_410_000,
        );
        kworker.host_ns = 780_000;
        let js = measured(vec![
            kworker,
            js_row(CulpritClass::Hypervisor, "host preemption", "", 4_910_000),
        ]);
        let p = perf(&[(CulpritClass::Kworker, "kworker/1:1", 8_190_000)], 0);
        let c = compare(&js, &p, &Tolerances::default());
        let k = c.row("kworker/1:1").unwrap();
        assert_eq!((k.js_ns, k.js_host_ns), (8_190_000, 780_000));
        assert_eq!(k.grade, Grade::Within);
        let md = c.to_markdown();
        assert!(md.contains("| 8.19 (7.41 + 0.78 host) | 8.19 |"), "{md}");
        assert!(
            md.contains(
                "host preemption inside runs: 0.78 ms of steal lay inside runs of kworker/1:1"
            ),
            "{md}"
        );
        assert!(
            md.contains("hypervisor host preemption 4.13 ms outside runs (+ 0.78 ms inside them, compared above)"),
            "{md}"
        );
        // Without the host's part it is outside, as it was.
        let mut js = js;
        js.rows[0].host_ns = 0;
        let c = compare(&js, &p, &Tolerances::default());
        assert_eq!(c.row("kworker/1:1").unwrap().grade, Grade::Outside);
        assert!(!c.to_markdown().contains("inside runs"));
    }

    #[test]
    fn tick_rows_add_up_by_name_whatever_their_class() {
        let js = measured(vec![
            js_row(
                CulpritClass::TimerTick,
                "local timer",
                "scheduler tick",
                30 * MS,
            ),
            js_row(
                CulpritClass::TimerTick,
                "local timer",
                "hrtimer_wakeup of sleep",
                5 * MS,
            ),
            js_row(CulpritClass::SelfNoise, "local timer", "", 5 * MS),
            js_row(CulpritClass::Task, "sh[42]", "SCHED_OTHER", 366_100_000),
            js_row(CulpritClass::Ipi, "reschedule", "", 100_000),
            // jitterscope's own sends are `self` rows named after the vector.
            MeasuredRow {
                vector: Some("reschedule".into()),
                ..js_row(
                    CulpritClass::SelfNoise,
                    "reschedule IPI",
                    "wake-up sent by js-consumer-1",
                    400_000,
                )
            },
        ]);
        let p = perf(
            &[
                (CulpritClass::TimerTick, "local timer", 39 * MS),
                (CulpritClass::Task, "sh[42]", 365_400_000),
                (CulpritClass::Ipi, "reschedule", 500_000),
            ],
            2 * MS,
        );
        let c = compare(&js, &p, &Tolerances::default());
        assert_eq!(c.row("reschedule").unwrap().js_ns, 500_000);
        let tick = c.row("local timer").unwrap();
        assert_eq!(tick.js_ns, 40 * MS);
        assert_eq!(tick.class, CulpritClass::TimerTick);
        assert_eq!(tick.grade, Grade::Within);
        assert_eq!(c.row("sh[42]").unwrap().grade, Grade::Within);
        assert!(c.passed(), "{:?}", c.failures());
        let md = c.to_markdown();
        assert!(md.contains("unknown owner: 2.00 ms in 1 interval"), "{md}");
        assert!(md.contains("**verdict: PASS**"), "{md}");
    }

    /// A tick of 2,000 pieces of 10 µs (20 ms) as perf saw it, and jitterscope's `js` ns of it,
    /// graded with `first` attached first.
    fn tick_graded(js: Nanos, first: Option<FirstAttached>) -> Row {
        let j = measured(vec![js_row(CulpritClass::TimerTick, "local timer", "", js)]);
        let mut p = perf(&[(CulpritClass::TimerTick, "local timer", 20 * MS)], 0);
        p.causes.get_mut("local timer").unwrap().pieces = 2_000;
        let tol = Tolerances {
            first,
            ..Tolerances::default()
        };
        compare(&j, &p, &tol).row("local timer").unwrap().clone()
    }

    #[test]
    fn the_handlers_allowance_widens_only_the_attach_orders_side() {
        // 2,000 pieces × 1.2 µs = 2.4 ms; ±5 % of 20 ms = 1 ms.
        let perf = Some(FirstAttached::Perf);
        let js = Some(FirstAttached::Jitterscope);
        // Perf first: jitterscope may lie under perf's by 1 + 2.4 ms, over it by 1 ms only.
        assert_eq!(tick_graded(16_700_000, perf).grade, Grade::Within);
        assert_eq!(tick_graded(16_500_000, perf).grade, Grade::Outside);
        assert_eq!(tick_graded(21_000_000, perf).grade, Grade::Within);
        assert_eq!(tick_graded(21_100_000, perf).grade, Grade::Outside);
        // The tick 1.2 times too long, where perf first puts it at 0.93 of perf's.
        assert_eq!(
            tick_graded(20 * MS * 93 / 100 * 12 / 10, perf).grade,
            Grade::Outside
        );
        // Jitterscope first: the mirror image.
        assert_eq!(tick_graded(23_300_000, js).grade, Grade::Within);
        assert_eq!(tick_graded(23_500_000, js).grade, Grade::Outside);
        assert_eq!(tick_graded(19_000_000, js).grade, Grade::Within);
        assert_eq!(tick_graded(18_900_000, js).grade, Grade::Outside);
        // The order not known: no allowance either way.
        assert_eq!(tick_graded(18_900_000, None).grade, Grade::Outside);
        assert_eq!(tick_graded(21_100_000, None).grade, Grade::Outside);
        let r = tick_graded(17 * MS, perf);
        assert_eq!(r.tolerance_text(), "±5% − 2.40ms");
        // The agreement counts only what lies beyond the allowance: 3 ms under, 2.4 allowed.
        assert_eq!(r.beyond_handlers(), 600_000);
        assert_eq!(tick_graded(17 * MS, js).beyond_handlers(), 3 * MS);
        assert!(r.within_bounds() && !tick_graded(16_500_000, perf).within_bounds());
    }

    #[test]
    fn small_and_unrecordable_causes_are_listed_not_graded() {
        let js = measured(vec![
            js_row(CulpritClass::Ipi, "irq_work", "", 3 * MS),
            js_row(CulpritClass::Softirq, "RCU", "", 300_000),
            js_row(
                CulpritClass::Kworker,
                "kworker/1:2",
                "refresh_vm_stats",
                2 * MS,
            ),
        ]);
        let p = perf(
            &[
                (CulpritClass::Softirq, "RCU", 100_000),
                (CulpritClass::Kworker, "kworker/1:2", 2 * MS + 50_000),
                (CulpritClass::Task, "perf[9]", 3 * MS),
            ],
            0,
        );
        let c = compare(&js, &p, &Tolerances::default());
        assert_eq!(c.row("irq_work").unwrap().grade, Grade::NotRecordable);
        assert_eq!(c.row("RCU").unwrap().grade, Grade::BelowFloor);
        assert_eq!(c.row("kworker/1:2").unwrap().grade, Grade::Within);
        // A task only perf saw, above the floor: jitterscope missed it.
        let missed = c.row("perf[9]").unwrap();
        assert_eq!((missed.js_ns, missed.grade), (0, Grade::Outside));
        assert!(c.failures()[0].starts_with("perf[9]: jitterscope 0.00 ms"));
        let md = c.to_markdown();
        assert!(
            md.contains("| kworker/1:2 (refresh_vm_stats) | kworker |"),
            "{md}"
        );
        assert!(md.contains("perf cannot record its exit"), "{md}");
    }

    #[test]
    fn a_task_whose_switches_perf_lost_is_not_failed_within_perfs_range() {
        let js = measured(vec![
            js_row(CulpritClass::Task, "tokio-rt-worker[68]", "", 14 * MS),
            js_row(CulpritClass::Task, "sh[42]", "", 30 * MS),
        ]);
        let mut p = perf(
            &[
                (CulpritClass::Task, "tokio-rt-worker[68]", MS),
                (CulpritClass::Task, "sh[42]", 10 * MS),
            ],
            19 * MS,
        );
        p.unknown_involving = [("tokio-rt-worker[68]".to_string(), 19 * MS)].into();
        let c = compare(&js, &p, &Tolerances::default());
        let t = c.row("tokio-rt-worker[68]").unwrap();
        assert_eq!((t.perf_unknown_ns, t.grade), (19 * MS, Grade::Uncertain));
        // A task perf saw whole is graded as ever.
        assert_eq!(c.row("sh[42]").unwrap().grade, Grade::Outside);
        let md = c.to_markdown();
        assert!(md.contains("| 1.00 (+ ≤ 19.00 unknown) |"), "{md}");
        assert_eq!(c.failures().len(), 2, "{:?}", c.failures()); // sh[42] and the agreement
    }

    #[test]
    fn folded_pids_join_the_tasks_jitterscope_folded() {
        let js = measured(vec![
            js_row(CulpritClass::Task, "sleep[7]", "", 5 * MS),
            js_row(CulpritClass::Task, "sleep[*]", "", 9 * MS),
        ]);
        let p = perf(
            &[
                (CulpritClass::Task, "sleep[7]", 5 * MS),
                (CulpritClass::Task, "sleep[8]", 4 * MS),
                (CulpritClass::Task, "sleep[9]", 5 * MS),
            ],
            0,
        );
        let c = compare(&js, &p, &Tolerances::default());
        assert_eq!(c.row("sleep[7]").unwrap().perf_ns, 5 * MS);
        assert_eq!(c.row("sleep[*]").unwrap().perf_ns, 9 * MS);
        assert!(c.row("sleep[8]").is_none());
    }

    #[test]
    fn the_many_small_causes_are_summed_up_unless_all_are_asked_for() {
        let rows: Vec<MeasuredRow> = (0..20)
            .map(|i| js_row(CulpritClass::Task, &format!("sleep[{i}]"), "", 10_000))
            .collect();
        let causes: Vec<(CulpritClass, String, Nanos)> = (0..20)
            .map(|i| (CulpritClass::Task, format!("sleep[{i}]"), 10_000))
            .collect();
        let causes: Vec<(CulpritClass, &str, Nanos)> = causes
            .iter()
            .map(|(c, n, ns)| (*c, n.as_str(), *ns))
            .collect();
        let c = compare(&measured(rows), &perf(&causes, 0), &Tolerances::default());
        let md = c.to_markdown();
        assert_eq!(md.matches("| sleep[").count(), UNGRADED_ROWS, "{md}");
        assert!(
            md.contains("| … 8 more causes under 1.00 ms in both | | 0.08 | 0.08 |"),
            "{md}"
        );
        assert_eq!(c.to_markdown_all().matches("| sleep[").count(), 20);
    }

    #[test]
    fn a_recording_that_misses_the_window_fails() {
        let js = measured(vec![]);
        let mut p = perf(&[], 0);
        p.first_event_ns = 5_000_000_000;
        let c = compare(&js, &p, &Tolerances::default());
        assert!(c.failures()[0].contains("not over the whole recorded window"));
    }
}
