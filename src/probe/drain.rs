//! The drain thread. The skeleton borrows its object storage, so this one thread owns all of it
//! from open to detach: it loads and attaches the programs, then, pinned to a housekeeping
//! CPU, empties the per-CPU record rings on a timer — each record decoded straight into the
//! batch it sends — and between drains serves the session's commands. On stop it detaches, drains what
//! is left and reads the programs' counters.

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::decode::{self, Record};
use super::glance::{Glance, Glimpses};
use super::kallsyms::Kallsyms;
use super::load::{self, Loaded};
use super::rings;
use super::skel::types::js_record;
use super::stats::{self, LiveCostCell, RunTimeStats};
use super::threads;
use super::tick;
use super::watch;
use super::{JitterscopeSkel, ProbeBatch, ProbeConfig, ProbeError, ProbeSummary};
use crate::model::Cpu;
use crate::platform::clock::own_thread_cpu_ns;
use crate::platform::pace::Pacer;

/// Room made in the drain thread's heap before it drains (`platform::heap`), besides its
/// batches.
const DRAIN_HEAP_ROOM: usize = 1 << 20;

/// Records decoded between two looks at the pacer (about a µs each).
const CONSUME_STEP: usize = 8;
/// Records sent to the collector at once (a quiet drain sends its records in one batch).
const BATCH_RECORDS: usize = 1024;
/// A batch's room: it is sent once a step of records takes it to `BATCH_RECORDS` or more.
const BATCH_ROOM: usize = BATCH_RECORDS + CONSUME_STEP;
/// Batches made before the drain begins, each with its room (about 100 KiB): half a second
/// of the hrtimer storm's records (some 90,000 a second) on their way to the collector and
/// back. A batch made while recording, room and all, grows the thread's heap in one piece —
/// some two dozen pages populated under `mlockall`, longer than a slice — and is made only
/// when all of these are out (a storm while the collector holds back its intake).
const BATCHES_MADE: usize = 48;

/// `--attribution end`: the share of a ring in use that it may reach by the next look (a
/// turn away) before it is drained — judged from how full it is and twice what it grew
/// since the last look. A quiet run fills an 8 MiB ring in a few minutes and waits until
/// three quarters; the hrtimer storm fills one in under 2 s and is drained every turn, as
/// when deciding live (a 128 MiB ring holds its 10 s). The same margin decides whether the
/// next look may come later (`next_wait`).
const AT_END_FULL: f64 = 0.75;

/// What the session asks of the drain thread.
pub(super) enum Command {
    SetWorkloadTids(Vec<u32>, SyncSender<Result<(), ProbeError>>),
    ListTasks(SyncSender<Result<Vec<watch::TaskRow>, ProbeError>>),
    Watch(
        Vec<u32>,
        Option<u32>,
        SyncSender<Result<super::watch::Added, ProbeError>>,
    ),
    /// A v2 cgroup's id and level: its threads are watched from their creation or move in.
    WatchCgroup(u64, u32, SyncSender<Result<(), ProbeError>>),
    Stop,
}

/// Where the drain thread sends its batches, and takes back emptied ones to fill again.
pub(super) struct Batches {
    pub(super) out: Sender<ProbeBatch>,
    pub(super) recycled: Receiver<ProbeBatch>,
    /// A beat after each drain, for a collector waiting on it (`ProbeSession::wait_drained`).
    pub(super) drained: SyncSender<()>,
}

/// What the session lets the drain thread do: its share of the CPU it may share with the
/// measured threads (kept with the collector's), and when the records are wanted. Deciding
/// live, every turn drains; deciding at the end, the records wait in the rings (a glance
/// gives the live view their kernel time) until a ring needs room or the collector asks.
pub trait Gate: Send + Sync + std::fmt::Debug {
    /// Culprits are decided at the end of the run: the records may wait in the rings.
    fn deciding_at_end(&self) -> bool;
    /// Whether the collector asked for the records since the last call (deciding at the end).
    fn take_records_wanted(&self) -> bool;
    /// True when the budget is spent: the turn's work waits (counted as a hold-back).
    fn hold_back(&self) -> bool;
    /// Whether work begun at `wall_from` (CLOCK_MONOTONIC) and `cpu_from` (the thread's CPU
    /// clock), both read when it began — the wall clock first — may go on.
    fn allows_since(&self, wall_from: u64, cpu_from: u64) -> bool;
    /// Adds the thread's CPU time on work that can wait.
    fn spend(&self, ns: u64);
    /// A drain sent its records; `emptied_at`: it emptied the rings in a drain begun then
    /// (every record committed before it has reached user space).
    fn delivered(&self, emptied_at: Option<u64>);
}

/// The drain thread's body: `ready` gets what loading found (or why it failed) as soon as the
/// programs are attached; the summary is returned once stopped.
pub(super) fn run(
    cfg: ProbeConfig,
    commands: Receiver<Command>,
    batches: Batches,
    ready: SyncSender<Result<Loaded, ProbeError>>,
    live: Arc<LiveCostCell>,
) -> Result<ProbeSummary, ProbeError> {
    if !cfg.drain_cpus.is_empty() {
        // Best effort: the drain thread belongs on a housekeeping CPU.
        let _ = crate::platform::affinity::set_current_thread_cpus(&cfg.drain_cpus);
    }
    // This thread's own heap (its batches are allocated here), grown ahead: see
    // `platform::heap`.
    crate::platform::heap::reserve_heap(DRAIN_HEAP_ROOM);
    let made: Vec<ProbeBatch> = (0..BATCHES_MADE)
        .map(|_| Vec::with_capacity(BATCH_ROOM))
        .collect();
    // Symbols first: reading /proc/kallsyms takes a while, and records must flow from the
    // moment `start` returns.
    let syms = Kallsyms::load();
    let symbols = !syms.is_empty();
    let mut storage = MaybeUninit::uninit();
    let mut second = MaybeUninit::uninit();
    let attempt = load_for_watch_or_run(&cfg, &syms, &mut storage, &mut second);
    let (mut skel, links, loaded) = match attempt {
        Ok(x) => x,
        Err(e) => {
            // The error goes to `start`, which is waiting for it; nothing else to report.
            let _ = ready.send(Err(e));
            return Ok(ProbeSummary::default());
        }
    };
    let mut stats = RunTimeStats::enable();
    let steal = loaded.steal.clone();
    let layout = loaded.rings.clone();
    let tick_traced = loaded
        .attach
        .iter()
        .any(|a| a.tracepoint == tick::TRACEPOINT && a.state == super::AttachState::Attached);
    let _ = ready.send(Ok(loaded));

    let rings = rings::open(&mut skel, &layout)?;
    let mut drainer = Drainer::new(&cfg, rings, syms, batches, made, live);
    serve(&cfg, &commands, &mut skel, stats.as_mut(), &mut drainer);
    drop(links);
    drainer.turn(true);
    // The rings are unmapped before the skeleton goes (its .bss holds their positions).
    drop(drainer);

    let mut summary = ProbeSummary {
        stats_enabled: stats.is_some(),
        symbols,
        steal_clock: steal.is_ok(),
        steal_clock_note: steal.err(),
        ..Default::default()
    };
    read_counters(&skel, &cfg.cpus, &mut summary);
    if tick_traced {
        if let Some(bss) = skel.maps.bss_data.as_deref() {
            summary.tick_stops = tick::read(&bss.tick_stops, &cfg.cpus);
        }
    }
    summary.costs = stats::program_costs(&skel);
    summary.floor = stats::floor_costs(&skel);
    summary.floor_place = cfg.floor;
    Ok(summary)
}

/// The drain thread's state from one turn to the next: the rings, its pacer, what it decodes
/// and sends, and (deciding at the end) the live view's kernel time.
struct Drainer {
    rings: rings::Rings,
    /// On a measured CPU (every CPU is measured, or the thread is unpinned), the ring is
    /// emptied a step at a time with pauses between short slices. Shared with the statistics
    /// refresh that follows a drain (`serve`).
    pacer: Pacer,
    gate: Option<Arc<dyn Gate>>,
    decoded: Decoded,
    batches: Batches,
    /// Batches made before the drain began, handed out when none comes back.
    made: Vec<ProbeBatch>,
    open_lost: Vec<(Cpu, u64)>,
    /// Deciding at the end: how full the fullest ring was at the last look, and what it
    /// grew since the look before (0 after a drain).
    last_fill: f64,
    grew: f64,
    /// Deciding at the end: the live preview the records glanced at are given to (see
    /// `glance`), its lock taken once a step of records (`CONSUME_STEP`).
    glance: Option<Arc<Mutex<dyn Glance>>>,
    live: Arc<LiveCostCell>,
    /// Records taken in since `serve` last looked (its wait grows while there are none).
    found: usize,
    /// This look was brought forward by a peek (`rushed`): the next wait is the shortest.
    rushed: bool,
}

impl Drainer {
    fn new(
        cfg: &ProbeConfig,
        rings: rings::Rings,
        syms: Kallsyms,
        batches: Batches,
        made: Vec<ProbeBatch>,
        live: Arc<LiveCostCell>,
    ) -> Drainer {
        let shared =
            cfg.drain_cpus.is_empty() || cfg.drain_cpus.iter().any(|c| cfg.cpus.contains(c));
        Drainer {
            rings,
            pacer: Pacer::new(shared),
            gate: cfg.gate.clone(),
            decoded: Decoded {
                syms,
                names: decode::Names::default(),
                batch: Vec::with_capacity(BATCH_ROOM),
                glimpses: Glimpses::default(),
            },
            batches,
            made,
            open_lost: Vec::new(),
            last_fill: 0.0,
            grew: 0.0,
            glance: cfg.glance.clone(),
            live,
            found: 0,
            rushed: false,
        }
    }

    /// Whether the records wait in the rings for the end (the gate says so).
    fn deciding_at_end(&self) -> bool {
        self.gate.as_ref().is_some_and(|g| g.deciding_at_end())
    }

    /// A turn's work: a drain or, deciding at the end while the rings have room, a glance.
    /// `last`: the drain after the probes detached, whatever the gate says.
    fn turn(&mut self, last: bool) {
        let began = crate::platform::clock::monotonic_ns();
        let at_end = self.gate.clone().filter(|g| !last && g.deciding_at_end());
        if let Some(gate) = at_end {
            let fill = self.rings.fullest();
            let grew = (fill - self.last_fill).max(0.0);
            (self.last_fill, self.grew) = (fill, grew);
            if !gate.take_records_wanted() && fill + 2.0 * grew < AT_END_FULL {
                // Culprits are decided at the end: the records wait in the rings meanwhile,
                // and the live view is given their time so far.
                self.glance(gate.as_ref(), began);
                return;
            }
            // This drain empties the rings (or most of them): growth is measured afresh.
            (self.last_fill, self.grew) = (0.0, 0.0);
        }
        if !last && self.gate.as_ref().is_some_and(|g| g.hold_back()) {
            // Over budget: the records wait in the ring (or are dropped there, counted).
            return;
        }
        self.drain(last, began);
    }

    /// Deciding at the end: the records' kernel time for the live view, read where they wait.
    /// Not before the collector said where the window begins, nor over the budget (the
    /// glance goes on from where it stopped, the view a turn older).
    fn glance(&mut self, gate: &dyn Gate, began: u64) {
        let from = self.live.window_from();
        if from == 0 || gate.hold_back() {
            return;
        }
        let cpu_before = own_thread_cpu_ns();
        let read_all = loop {
            let mut sink = self.glance.as_ref().and_then(|g| g.lock().ok());
            let decoded = &mut self.decoded;
            let n = self.rings.glance(CONSUME_STEP, &mut |r| {
                if let Some(sink) = sink.as_deref_mut() {
                    decoded.glimpse(r, from, sink);
                }
            });
            drop(sink);
            if n < CONSUME_STEP {
                break true;
            }
            if self.pacer.between() && !gate.allows_since(began, cpu_before) {
                break false;
            }
        };
        // The view's copy is a piece of its own (cold once a second: it cannot share a slice
        // with the last step of the glance).
        self.pacer.between();
        glanced(&self.glance, read_all.then_some(began));
        self.pacer.between();
        gate.spend(own_thread_cpu_ns().saturating_sub(cpu_before));
    }

    /// Empties the rings into batches for the collector, a step at a time, within the budget
    /// (the last drain, whatever it is).
    fn drain(&mut self, last: bool, began: u64) {
        let cpu_before = own_thread_cpu_ns();
        // The last drain, unpaced, has no wake-up of its own (`serve` begins the others).
        if last {
            self.pacer.begin();
        }
        // Before reading: a window still open now has no record among those read below.
        self.open_lost.clear();
        self.rings.open_lost(&mut self.open_lost);
        let at_end = self.gate.as_ref().is_some_and(|g| g.deciding_at_end());
        let emptied = loop {
            let from = self.live.window_from();
            let wanted = at_end && !last && from > 0;
            let mut sink = (self.glance.as_ref())
                .filter(|_| wanted)
                .and_then(|g| g.lock().ok());
            let decoded = &mut self.decoded;
            let n = self.rings.consume_glanced(CONSUME_STEP, &mut |r, glanced| {
                // Taken before the end without a glance: into the live view's time too.
                if let Some(sink) = sink.as_deref_mut().filter(|_| !glanced) {
                    decoded.glimpse(&r, from, sink);
                }
                decoded.push(&r);
            });
            drop(sink);
            self.found += n;
            // Fewer than asked: the rings are empty for now (or wait for a slot being written).
            if n < CONSUME_STEP {
                break true;
            }
            if self.decoded.batch.len() >= BATCH_RECORDS {
                self.send();
            }
            // Once a slice (the CPU clock is a system call): a storm's backlog is taken in
            // over several drains within the budget, not in one drain past it.
            if self.pacer.between()
                && !last
                && (self.gate.as_ref()).is_some_and(|g| !g.allows_since(began, cpu_before))
            {
                break false;
            }
        };
        // Its count comes with the window's own record (or, for the last windows of a run,
        // only in the CPU's drop counter).
        let lost = self.open_lost.iter().map(|&(cpu, since)| Record::Lost {
            cpu,
            start_ns: since,
            end_ns: began.max(since),
            count: 0,
        });
        self.decoded.batch.extend(lost);
        self.send();
        if emptied {
            self.live.emptied_at.store(began, Ordering::Release);
        }
        let Some(gate) = self.gate.clone() else {
            return;
        };
        gate.delivered(emptied.then_some(began));
        if at_end && !last {
            glanced(&self.glance, emptied.then_some(began));
        }
        gate.spend(own_thread_cpu_ns().saturating_sub(cpu_before));
    }

    /// Sends the batch under way, if it holds any record, and takes an empty one in its place.
    fn send(&mut self) {
        if self.decoded.batch.is_empty() {
            return;
        }
        let fresh = (self.batches.recycled.try_recv().ok())
            .or_else(|| self.made.pop())
            .unwrap_or_else(|| Vec::with_capacity(BATCH_ROOM));
        let full = std::mem::replace(&mut self.decoded.batch, fresh);
        let _ = self.batches.out.send(full);
    }
}

/// Loads and attaches the programs. Some kernels refuse fentry/fexit (no ftrace of kernel
/// functions): a watch then goes on without page-fault times (loaded again into `second`),
/// and says so.
fn load_for_watch_or_run<'obj>(
    cfg: &ProbeConfig,
    syms: &Kallsyms,
    storage: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    second: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
) -> Result<load::Attached<'obj>, ProbeError> {
    match load::load_and_attach(cfg, syms, storage) {
        Err(e) if cfg.watch && cfg.faults => {
            let without = ProbeConfig {
                faults: false,
                ..cfg.clone()
            };
            load::load_and_attach(&without, syms, second).map(|(s, l, mut loaded)| {
                loaded.attach.push(super::AttachStatus {
                    tracepoint: "handle_mm_fault (page faults)".into(),
                    state: super::AttachState::Unavailable(format!(
                        "the kernel refused fentry/fexit programs on it ({}): page faults are not timed",
                        match &e {
                            ProbeError::Permission { errno } => format!(
                                "{errno}: this kernel does not allow tracing kernel functions"
                            ),
                            other => other.to_string().lines().next().unwrap_or_default().to_string(),
                        }
                    )),
                });
                (s, l, loaded)
            })
        }
        other => other,
    }
}

/// The records of the drain under way, decoded as the rings hand them over.
struct Decoded {
    syms: Kallsyms,
    names: decode::Names,
    batch: ProbeBatch,
    /// Deciding at the end, the culprits named for the live preview.
    glimpses: Glimpses,
}

impl Decoded {
    /// Gives `r` to the live preview, its culprit named as the decoder names it.
    fn glimpse(&mut self, r: &js_record, from_ns: u64, sink: &mut dyn Glance) {
        let (syms, names) = (&mut self.syms, &mut self.names);
        let name = &mut |r: &js_record| decode::culprit_named(r, syms, names);
        self.glimpses.push(r, from_ns, name, sink);
    }

    /// Records too short or of an unknown kind or class are skipped, as the decoder says.
    fn push(&mut self, r: &js_record) {
        if let Some(r) = decode::decode_with(r, &mut self.syms, &mut self.names) {
            self.batch.push(r);
        }
    }
}

/// A glance, or a drain that took records in for the live preview, is over (see
/// `Glance::glanced`).
fn glanced(glance: &Option<Arc<Mutex<dyn Glance>>>, complete_to_ns: Option<u64>) {
    if let Some(mut g) = glance.as_ref().and_then(|g| g.lock().ok()) {
        g.glanced(complete_to_ns);
    }
}

/// Drains every `cfg.drain_interval` until told to stop (or the session is gone); between
/// drains, fills the tid table as asked; after each, refreshes the live cost (in the drain's
/// slice: the drain's pacer).
fn serve(
    cfg: &ProbeConfig,
    commands: &Receiver<Command>,
    skel: &mut JitterscopeSkel,
    mut stats: Option<&mut RunTimeStats>,
    drainer: &mut Drainer,
) {
    let mut next = Instant::now() + cfg.drain_interval;
    let mut wait = cfg.drain_interval;
    let mut looked = Instant::now();
    loop {
        // Deciding at the end, a wait longer than `drain_interval` is peeked into every
        // `drain_interval`: a storm that begins in it is seen as soon as it would be without it.
        let peeks = wait > cfg.drain_interval && drainer.deciding_at_end();
        let until = match peeks {
            true => next.min(Instant::now() + cfg.drain_interval),
            false => next,
        };
        let timeout = until.saturating_duration_since(Instant::now());
        match commands.recv_timeout(timeout) {
            Ok(Command::SetWorkloadTids(tids, reply)) => {
                let _ = reply.send(threads::set_workload_tids(skel, &tids));
                continue;
            }
            Ok(Command::ListTasks(reply)) => {
                let _ = reply.send(watch::list_tasks(skel));
                continue;
            }
            Ok(Command::Watch(tids, follow, reply)) => {
                let _ = reply.send(watch::watch_threads(skel, &tids, follow));
                continue;
            }
            Ok(Command::WatchCgroup(id, level, reply)) => {
                let _ = reply.send(watch::watch_cgroup(skel, id, level));
                continue;
            }
            Ok(Command::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if now < next {
            // A peek: the rings' fill only (a few cache lines), the turn now if they grow too
            // fast to wait for it; the collector woken alone if something asks for it.
            let fill = drainer.rings.fullest();
            if !rushed(fill, drainer.last_fill, now - looked, next - now) {
                if cfg.attention.is_some_and(|asks| asks()) {
                    let _ = drainer.batches.drained.try_send(());
                }
                continue;
            }
            (next, drainer.rushed) = (now, true);
        }
        looked = now;
        // The slice begins as the thread wakes: what the drain looks at before it reads the
        // rings (the budget, how full they are, its CPU clock: a system call) is part of the
        // stretch the measured thread waits through, so it is counted from the first read.
        drainer.pacer.begin();
        drainer.turn(false);
        // Full when nobody waits (a watch, or a collector still at its last turn): dropped.
        let _ = drainer.batches.drained.try_send(());
        let look = Look {
            found: std::mem::take(&mut drainer.found),
            rushed: std::mem::take(&mut drainer.rushed),
            fill: drainer.last_fill,
            grew: drainer.grew,
        };
        wait = next_wait(wait, cfg, look);
        next += wait;
        if let Some(stats) = stats.as_deref_mut() {
            stats.refresh(skel, &drainer.live, &mut drainer.pacer);
        }
        // Waits now: a collector woken by this drain goes on in the slice begun here.
        drainer.pacer.end();
    }
}

/// Deciding at the end, a peek into a long wait: whether the rings, `fill` full now and
/// `last_fill` at the last look, `since` ago, grow fast enough that twice their growth until
/// the look planned `left` from now would bring them within `AT_END_FULL` — the margin of a
/// look itself.
fn rushed(fill: f64, last_fill: f64, since: Duration, left: Duration) -> bool {
    let rate = (fill - last_fill).max(0.0) / since.as_secs_f64().max(1e-3);
    fill + 2.0 * rate * left.as_secs_f64() >= AT_END_FULL
}

/// What the last look at the rings saw, for the wait after it.
#[derive(Debug, Clone, Copy, Default)]
struct Look {
    /// Records taken in.
    found: usize,
    /// The look came early, a peek having seen the rings grow fast (`rushed`).
    rushed: bool,
    /// Deciding at the end, the records left in the rings for the end: how full the fullest
    /// is, and what it grew over the last wait (both 0 after a drain).
    fill: f64,
    grew: f64,
}

/// The wait after a look at the rings (`seen`), the last one having been `wait`: twice as
/// long while the rings can wait, up to `cfg.drain_idle`; `cfg.drain_interval` again from
/// the first record taken in, or once the growth of the longer wait (the last wait's, in
/// proportion) would bring a ring within twice of `AT_END_FULL` — the margin of the look
/// itself.
fn next_wait(wait: Duration, cfg: &ProbeConfig, seen: Look) -> Duration {
    let Some(idle) = cfg.drain_idle else {
        return cfg.drain_interval;
    };
    let longer = (wait * 2).min(idle).max(cfg.drain_interval);
    let grows = seen.grew * longer.as_secs_f64() / wait.as_secs_f64().max(1e-3);
    if seen.found == 0 && !seen.rushed && seen.fill + 2.0 * grows < AT_END_FULL {
        longer
    } else {
        cfg.drain_interval
    }
}

/// The programs' per-CPU counters (records submitted, failed reserves) and last steal clock
/// reads, for the measured CPUs, and the threads a watch left out because its map was full.
fn read_counters(skel: &JitterscopeSkel, cpus: &[Cpu], summary: &mut ProbeSummary) {
    let Some(bss) = skel.maps.bss_data.as_deref() else {
        return;
    };
    // SAFETY: reading a plain integer the kernel may still be updating.
    summary.watch_map_full = unsafe { std::ptr::read_volatile(&bss.watch_map_full) };
    for &cpu in cpus {
        if let Some(c) = bss.counters.get(cpu as usize) {
            // SAFETY: reading plain integers the kernel may still be updating.
            let c = unsafe { std::ptr::read_volatile(c) };
            summary.events.push((cpu, c.events));
            if c.rb_drops > 0 {
                summary.drops.push((cpu, c.rb_drops));
            }
        }
        if let Some(&ns) = bss.steal_read.get(cpu as usize) {
            if ns > 0 {
                summary.steal_clock_ns.push((cpu, ns));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: Look = Look {
        found: 0,
        rushed: false,
        fill: 0.0,
        grew: 0.0,
    };

    #[test]
    fn an_idle_drain_waits_longer_up_to_its_limit_and_not_once_records_come() {
        let ms = Duration::from_millis;
        let mut cfg = ProbeConfig::new(vec![1]);
        assert_eq!(
            next_wait(ms(250), &cfg, EMPTY),
            ms(250),
            "no idle limit: always the same"
        );
        cfg.drain_idle = Some(ms(1000));
        let waits: Vec<_> =
            std::iter::successors(Some(ms(250)), |&w| Some(next_wait(w, &cfg, EMPTY)))
                .take(5)
                .collect();
        assert_eq!(waits, [ms(250), ms(500), ms(1000), ms(1000), ms(1000)]);
        let one = Look { found: 1, ..EMPTY };
        assert_eq!(
            next_wait(ms(1000), &cfg, one),
            ms(250),
            "a record: back at once"
        );
    }

    #[test]
    fn records_left_for_the_end_wait_longer_only_while_the_rings_have_room_for_it() {
        let ms = Duration::from_millis;
        let mut cfg = ProbeConfig::new(vec![1]);
        (cfg.drain_interval, cfg.drain_idle) = (ms(1000), Some(ms(2000)));
        // A quiet run: 1 % a second, a ring a tenth full.
        let quiet = Look {
            fill: 0.10,
            grew: 0.01,
            ..EMPTY
        };
        assert_eq!(next_wait(ms(1000), &cfg, quiet), ms(2000));
        assert_eq!(next_wait(ms(2000), &cfg, quiet), ms(2000));
        // 20 % a second: two seconds of it, twice, from 20 % full, pass three quarters.
        let storm = Look {
            fill: 0.20,
            grew: 0.20,
            ..EMPTY
        };
        assert_eq!(next_wait(ms(1000), &cfg, storm), ms(1000));
        // The same growth over two seconds is half the rate: a longer wait still fits.
        assert_eq!(next_wait(ms(2000), &cfg, storm), ms(2000));
        // Nearly full: the next look comes a second away.
        let full = Look {
            fill: 0.70,
            grew: 0.03,
            ..EMPTY
        };
        assert_eq!(next_wait(ms(2000), &cfg, full), ms(1000));
        let rushed = Look {
            rushed: true,
            ..quiet
        };
        assert_eq!(next_wait(ms(2000), &cfg, rushed), ms(1000));
    }

    #[test]
    fn a_peek_into_a_long_wait_rushes_the_look_only_for_a_storm() {
        let s = Duration::from_secs;
        // A quiet run: 1 % a second, a look two seconds away.
        assert!(!rushed(0.11, 0.10, s(1), s(2)));
        // A storm begun since the last look: 20 % in a second, 40 % more by the look.
        assert!(rushed(0.30, 0.10, s(1), s(2)));
        // The same growth with the look a second away leaves room (70 %).
        assert!(!rushed(0.30, 0.10, s(1), s(1)));
        // A ring emptied by the last drain and filling back slowly.
        assert!(!rushed(0.02, 0.0, s(2), s(1)));
    }
}
