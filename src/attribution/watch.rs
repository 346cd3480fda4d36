//! Watch mode's stall source, from the probes' records alone: the windows in which a watched
//! thread wanted its CPU and did not have it, per thread, handed to the engine as stalls —
//!
//! - on-CPU: records nested in the thread's own run (IRQs, softirqs, the timer, IPIs, NMIs,
//!   its page faults), back-to-back ones joined into one interruption;
//! - preempted: switched out runnable until it ran again (split where it migrated);
//! - wake-up delay: woken (or created) until it ran;
//! - hypervisor: the steal clock's growth while it was on its CPU, as a measured amount (the
//!   clock does not say where in its window; the interruption is placed at the window's end).
//!
//! and what each thread's histograms, totals and ranking need.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;

use super::engine::{Share, Verdict};
use super::ranking::Ranking;
use super::run::RunAttribution;
use crate::model::{
    Cpu, Culprit, CulpritClass, Interruption, Nanos, Stall, StealSample, ThreadChange, ThreadEvent,
    ThreadRole, Wait, WaitKind, Who,
};

/// Records of a thread's run closer than this are one interruption (the thread got back to
/// its own code for less than this in between: an IRQ, then the softirq run on its exit).
pub const JOIN_NS: Nanos = 2_000;

/// Distinct culprits a watched thread's own ranking keeps before it folds pids (the run-wide
/// ranking keeps `ranking::MAX_CULPRITS`): memory stays flat with many threads watched.
pub const THREAD_CULPRITS_KEPT: usize = 128;

/// The longest duration a watched thread's histograms hold apart (one hour); a longer one is
/// counted as this.
pub const HISTOGRAM_MAX_NS: Nanos = 3_600_000_000_000;

/// A watched thread's histogram: from 1 ns, 2 significant digits (values within 1 %), grown
/// to the longest duration it was given (at most `HISTOGRAM_MAX_NS`). Each starts at about
/// 2 KiB and takes 35 KiB for the whole hour, a thread's four 140 KiB: a process's threads
/// may each hold a long duration (17,000 threads made runnable at once each wait seconds for
/// a CPU), and at 3 digits the four took 1 MiB at the full range, 18 GiB for 17,000 threads.
/// The run's own histograms keep 3 digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new(2).expect("2 significant digits are valid")
}

/// `v` into a histogram of `new_histogram`, held to its range (`saturating_record` would
/// hold it to the range the histogram has grown to so far, not grow it).
fn record(h: &mut Histogram<u64>, v: Nanos) {
    let v = v.clamp(1, HISTOGRAM_MAX_NS);
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

/// What a watched thread's interruption was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterruptionKind {
    /// Records nested in its own run.
    OnCpu,
    Preempted,
    /// Woken (or created) until it ran.
    WakeupDelay,
    /// Steal-clock growth while it ran.
    Hypervisor,
}

impl InterruptionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptionKind::OnCpu => "on-CPU interruption",
            InterruptionKind::Preempted => "preempted",
            InterruptionKind::WakeupDelay => "wake-up delay",
            InterruptionKind::Hypervisor => "host preemption",
        }
    }
}

/// A watched thread's account in the book, for as long as the watch lasts. Kernel tids are
/// not that: an exec beside the main thread takes the main thread's id, and a new thread may
/// take the id of one that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountId(u32);

/// What a thread event did to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// The account of the thread the event is about (None: the exit of a thread never seen).
    pub thread: Option<AccountId>,
    /// The account that held the event's thread id until then, an exited thread's, which
    /// keeps its figures under that id as it was.
    pub retired: Option<AccountId>,
}

/// One watched thread's account.
#[derive(Debug, Clone)]
pub struct ThreadAccount {
    pub id: AccountId,
    /// Kernel thread id (its last: an exec beside the main thread changes it).
    pub tid: u32,
    /// Ids in jitterscope's PID namespace (what the user sees); 0 when not known.
    pub ns_tid: u32,
    pub ns_pid: u32,
    pub name: String,
    pub first_seen_ns: Nanos,
    pub exited_ns: Option<Nanos>,
    /// CPUs where it was interrupted or ran after a wait.
    pub cpus: Vec<Cpu>,
    /// Interruption durations: on-CPU, preempted, host preemption.
    pub interruptions: Histogram<u64>,
    /// Wake-up delays (woken or created → on a CPU).
    pub wakeups: Histogram<u64>,
    /// The same since the last interval was taken (the .hlog and the live view).
    pub interval_interruptions: Histogram<u64>,
    pub interval_wakeups: Histogram<u64>,
    /// The longest interruption of each past interval that had one, oldest first, with the
    /// interval's number (the live view's chart; the intervals without are not kept).
    pub interval_max: std::collections::VecDeque<(u64, Nanos)>,
    /// Its interval histograms took a value since they were last taken (it is in
    /// `WatchBook::touched`).
    pub interval_touched: bool,
    /// Total time per kind.
    pub by_kind: BTreeMap<InterruptionKind, (u64, Nanos)>,
    pub ranking: Ranking,
}

impl ThreadAccount {
    fn new(id: AccountId, tid: u32, ns_tid: u32, ns_pid: u32, name: &str, at_ns: Nanos) -> Self {
        ThreadAccount {
            id,
            tid,
            ns_tid,
            ns_pid,
            name: name.to_string(),
            first_seen_ns: at_ns,
            exited_ns: None,
            cpus: Vec::new(),
            interruptions: new_histogram(),
            wakeups: new_histogram(),
            interval_interruptions: new_histogram(),
            interval_wakeups: new_histogram(),
            interval_max: Default::default(),
            interval_touched: false,
            by_kind: BTreeMap::new(),
            ranking: Ranking::with_cap(THREAD_CULPRITS_KEPT),
        }
    }

    /// Interrupted time of every kind (wake-up delays included).
    pub fn taken_ns(&self) -> Nanos {
        self.by_kind.values().map(|v| v.1).sum()
    }

    pub fn kind(&self, k: InterruptionKind) -> (u64, Nanos) {
        self.by_kind.get(&k).copied().unwrap_or_default()
    }

    /// Counts an interruption; true when it is the first of the interval under way (the
    /// thread is then to be put in `WatchBook::touched`).
    #[must_use]
    fn count(&mut self, kind: InterruptionKind, cpu: Cpu, ns: Nanos) -> bool {
        let e = self.by_kind.entry(kind).or_default();
        e.0 += 1;
        e.1 += ns;
        if kind == InterruptionKind::WakeupDelay {
            record(&mut self.wakeups, ns);
            record(&mut self.interval_wakeups, ns);
        } else {
            record(&mut self.interruptions, ns);
            record(&mut self.interval_interruptions, ns);
        }
        if let Err(i) = self.cpus.binary_search(&cpu) {
            self.cpus.insert(i, cpu);
        }
        !std::mem::replace(&mut self.interval_touched, true)
    }
}

/// An on-CPU interruption being assembled from records of one thread's run on one CPU.
#[derive(Debug, Clone, Copy)]
struct Open {
    start_ns: Nanos,
    end_ns: Nanos,
}

/// The watch's bookkeeping beside the engine (which `RunAttribution` holds).
#[derive(Default)]
pub struct WatchBook {
    /// Every thread watched, in the order first seen: an `AccountId` is a place here.
    accounts: Vec<ThreadAccount>,
    /// The account holding each kernel tid now.
    holders: HashMap<u32, AccountId>,
    /// Kernel tids whose holder changed: until when each former holder had it, oldest first.
    /// A record is the holder's of its time (its interruption may be decided after the
    /// change).
    former: HashMap<u32, Vec<(Nanos, AccountId)>>,
    open: HashMap<(u32, Cpu), Open>,
    /// Stalls handed to the engine and not yet decided: what kind each is.
    kinds: HashMap<(u32, Nanos, Cpu), InterruptionKind>,
    /// Decided interruptions per kind, of every thread (the worst ones' kinds for reports).
    pub decided_kinds: HashMap<(u32, Nanos, Cpu), InterruptionKind>,
    /// Keep the kinds of at most this many decided stalls (the worst the book keeps).
    keep_kinds: usize,
    /// The threads whose interval histograms took a value since they were last taken: the
    /// interval's work is theirs, not every thread's.
    pub touched: Vec<AccountId>,
}

impl WatchBook {
    pub fn new(keep: usize) -> Self {
        WatchBook {
            keep_kinds: keep.max(1) * 4,
            ..Default::default()
        }
    }

    /// Every thread watched, by kernel tid and, for one tid, in the order they held it.
    pub fn threads(&self) -> Vec<&ThreadAccount> {
        let mut all: Vec<&ThreadAccount> = self.accounts.iter().collect();
        all.sort_by_key(|t| (t.tid, t.first_seen_ns, t.id));
        all
    }

    pub fn thread(&self, id: AccountId) -> &ThreadAccount {
        &self.accounts[id.0 as usize]
    }

    pub fn thread_mut(&mut self, id: AccountId) -> &mut ThreadAccount {
        &mut self.accounts[id.0 as usize]
    }

    /// The account holding kernel tid `tid` now.
    pub fn current(&self, tid: u32) -> Option<AccountId> {
        self.holders.get(&tid).copied()
    }

    /// The account that held kernel tid `tid` at `at_ns`.
    pub fn holder(&self, tid: u32, at_ns: Nanos) -> Option<AccountId> {
        let former = self.former.get(&tid).into_iter().flatten();
        former
            .filter(|&&(until, _)| at_ns < until)
            .map(|&(_, id)| id)
            .next()
            .or_else(|| self.current(tid))
    }

    /// A new account, holding `tid` from now.
    fn open_account(
        &mut self,
        tid: u32,
        ns_tid: u32,
        ns_pid: u32,
        name: &str,
        at: Nanos,
    ) -> AccountId {
        let id = AccountId(self.accounts.len() as u32);
        self.accounts
            .push(ThreadAccount::new(id, tid, ns_tid, ns_pid, name, at));
        self.holders.insert(tid, id);
        id
    }

    /// `tid` given up at `at_ns` by the account holding it, which keeps its figures (under
    /// that id as it was) and is exited by then if its exit was not seen.
    fn give_up(&mut self, tid: u32, at_ns: Nanos) -> Option<AccountId> {
        let id = self.holders.remove(&tid)?;
        self.former.entry(tid).or_default().push((at_ns, id));
        self.thread_mut(id).exited_ns.get_or_insert(at_ns);
        Some(id)
    }

    /// A thread watched from the start (or found later): its ids and name; its account.
    pub fn add_thread(
        &mut self,
        tid: u32,
        ns_tid: u32,
        ns_pid: u32,
        name: &str,
        at: Nanos,
    ) -> AccountId {
        self.add(tid, ns_tid, ns_pid, name, at).0
    }

    /// A thread watched from now: its account, and the account retired from its id. One
    /// already watched under that id is not added again; the account of an exited one that
    /// had it is retired.
    fn add(
        &mut self,
        tid: u32,
        ns_tid: u32,
        ns_pid: u32,
        name: &str,
        at_ns: Nanos,
    ) -> (AccountId, Option<AccountId>) {
        if let Some(id) = self.current(tid) {
            if self.thread(id).exited_ns.is_none() {
                return (id, None);
            }
        }
        let retired = self.give_up(tid, at_ns);
        (self.open_account(tid, ns_tid, ns_pid, name, at_ns), retired)
    }

    /// A thread created in, exited from, or exec'd in the watched set.
    pub fn thread_event(&mut self, e: &ThreadEvent, ns_pid: u32) -> Applied {
        match e.change {
            ThreadChange::Created { .. } => {
                let (id, retired) = self.add(e.tid, e.ns_tid, ns_pid, &e.name, e.at_ns);
                Applied {
                    thread: Some(id),
                    retired,
                }
            }
            ThreadChange::Exited { .. } => {
                // The exit of the thread that had the id then: an exec beside the main thread
                // may have taken it since (their records come from two CPUs).
                let thread = self.holder(e.tid, e.at_ns);
                if let Some(id) = thread {
                    let t = self.thread_mut(id);
                    t.exited_ns = Some(e.at_ns);
                    if !e.name.is_empty() {
                        t.name = e.name.clone();
                    }
                }
                Applied {
                    thread,
                    retired: None,
                }
            }
            ThreadChange::Exec { old_tid } => self.exec(e, old_tid, ns_pid),
        }
    }

    /// Thread `old_tid` exec'd beside its process's main thread and is `e.tid` from `e.at_ns`
    /// (the kernel gave it the main thread's id): its account moves to that id, the main
    /// thread's (which exited) is retired.
    fn exec(&mut self, e: &ThreadEvent, old_tid: u32, ns_pid: u32) -> Applied {
        let moving = self.current(old_tid);
        let retired = match self.current(e.tid) {
            Some(id) if Some(id) != moving => self.give_up(e.tid, e.at_ns),
            _ => None,
        };
        let Some(id) = moving else {
            let id = self.open_account(e.tid, e.ns_tid, ns_pid, &e.name, e.at_ns);
            return Applied {
                thread: Some(id),
                retired,
            };
        };
        self.holders.remove(&old_tid);
        self.former.entry(old_tid).or_default().push((e.at_ns, id));
        self.holders.insert(e.tid, id);
        let t = self.thread_mut(id);
        t.tid = e.tid;
        t.ns_tid = e.ns_tid;
        if ns_pid != 0 {
            t.ns_pid = ns_pid;
        }
        if !e.name.is_empty() {
            t.name = e.name.clone();
        }
        Applied {
            thread: Some(id),
            retired,
        }
    }

    /// The account of `tid` at `at_ns`, opened if it has none (a thread the kernel watches
    /// that user space was not told of).
    fn account(&mut self, tid: u32, at_ns: Nanos) -> AccountId {
        match self.holder(tid, at_ns) {
            Some(id) => id,
            None => self.open_account(tid, 0, 0, "", at_ns),
        }
    }

    /// An interruption of `tid` into its account, the thread noted as touched by the
    /// interval under way.
    fn count(&mut self, tid: u32, at_ns: Nanos, kind: InterruptionKind, cpu: Cpu, ns: Nanos) {
        let id = self.account(tid, at_ns);
        if self.thread_mut(id).count(kind, cpu, ns) {
            self.touched.push(id);
        }
    }

    fn stall(&mut self, attr: &mut RunAttribution, s: Stall, kind: InterruptionKind) {
        let ThreadRole::Watched(tid) = s.thread else {
            return;
        };
        self.count(tid, s.start_ns, kind, s.cpu, s.duration_ns());
        self.kinds.insert((tid, s.start_ns, s.cpu), kind);
        attr.stall(s);
    }

    /// A record of the probes: into the engine, and, when it is nested in a watched
    /// thread's run, into that thread's current on-CPU interruption.
    pub fn interruption(&mut self, attr: &mut RunAttribution, i: Interruption) {
        let on_cpu = i.victim != 0
            && (i.class.level() >= 2 || i.class == CulpritClass::Fault)
            && i.end_ns > i.start_ns;
        if on_cpu {
            let key = (i.victim, i.cpu);
            match self.open.get_mut(&key) {
                Some(o) if i.start_ns <= o.end_ns + JOIN_NS && i.end_ns + JOIN_NS >= o.start_ns => {
                    o.start_ns = o.start_ns.min(i.start_ns);
                    o.end_ns = o.end_ns.max(i.end_ns);
                }
                _ => {
                    if let Some(o) = self.open.insert(
                        key,
                        Open {
                            start_ns: i.start_ns,
                            end_ns: i.end_ns,
                        },
                    ) {
                        self.close(attr, key, o);
                    }
                }
            }
        }
        attr.interruption(i);
    }

    fn close(&mut self, attr: &mut RunAttribution, (tid, cpu): (u32, Cpu), o: Open) {
        let s = Stall {
            cpu,
            thread: ThreadRole::Watched(tid),
            start_ns: o.start_ns,
            end_ns: o.end_ns,
        };
        self.stall(attr, s, InterruptionKind::OnCpu);
    }

    /// A wait: one stall, or two where it moved to another CPU while waiting.
    pub fn wait(&mut self, attr: &mut RunAttribution, w: &Wait) {
        let kind = match w.kind {
            WaitKind::Preempted => InterruptionKind::Preempted,
            WaitKind::Wakeup | WaitKind::New => InterruptionKind::WakeupDelay,
        };
        let thread = ThreadRole::Watched(w.tid);
        let id = self.account(w.tid, w.start_ns);
        let t = &mut self.accounts[id.0 as usize];
        // Named as the kernel names it now: a thread takes its creator's name at its creation
        // and may set its own later (prctl PR_SET_NAME, /proc/self/comm, an exec).
        if !w.name.is_empty() && t.name != w.name {
            t.name = w.name.clone();
        }
        match w.migrated_ns {
            Some(m) if w.from_cpu != w.cpu && m > w.start_ns && m < w.end_ns => {
                // One interruption in the histogram, two windows for the engine.
                if t.count(kind, w.cpu, w.duration_ns()) {
                    self.touched.push(id);
                }
                for (cpu, a, b) in [(w.from_cpu, w.start_ns, m), (w.cpu, m, w.end_ns)] {
                    self.kinds.insert((w.tid, a, cpu), kind);
                    attr.stall(Stall {
                        cpu,
                        thread,
                        start_ns: a,
                        end_ns: b,
                    });
                }
            }
            _ => self.stall(
                attr,
                Stall {
                    cpu: w.cpu,
                    thread,
                    start_ns: w.start_ns,
                    end_ns: w.end_ns,
                },
                kind,
            ),
        }
    }

    /// Steal-clock growth: while a watched thread ran, its own (host preemption, measured by
    /// the clock); otherwise the engine's, for the waits it falls in.
    pub fn steal(&mut self, attr: &mut RunAttribution, s: StealSample) {
        if s.victim == 0 || s.steal_ns == 0 {
            attr.steal(s);
            return;
        }
        attr.steal_seen_only(&s);
        let start = s.to_ns.saturating_sub(s.steal_ns).max(s.from_ns);
        let stall = Stall {
            cpu: s.cpu,
            thread: ThreadRole::Watched(s.victim),
            start_ns: start,
            end_ns: s.to_ns,
        };
        self.count(
            s.victim,
            start,
            InterruptionKind::Hypervisor,
            s.cpu,
            s.steal_ns,
        );
        let v = Verdict {
            stall,
            culprits: vec![Share {
                culprit: Culprit {
                    class: CulpritClass::Hypervisor,
                    who: Who::Host { cpu: s.cpu },
                },
                via: None,
                measured_ns: s.steal_ns,
                inferred_ns: 0,
                host_ns: 0,
                episodes: 1,
                longest_ns: s.steal_ns,
                share: 1.0,
            }],
            explained_share: 1.0,
            incomplete: false,
            timeline: Vec::new(),
            hypervisor: vec![(start, s.to_ns)],
        };
        self.remember_kind(&v, InterruptionKind::Hypervisor);
        if let Some(id) = self.holder(s.victim, start) {
            self.thread_mut(id).ranking.add(&v);
        }
        attr.keep_verdict(v);
    }

    /// Closes on-CPU interruptions that nothing can extend any more (`before`: records up
    /// to there have arrived).
    pub fn close_before(&mut self, attr: &mut RunAttribution, before: Nanos) {
        let done: Vec<(u32, Cpu)> = self
            .open
            .iter()
            .filter(|(_, o)| o.end_ns + JOIN_NS < before)
            .map(|(k, _)| *k)
            .collect();
        for key in done {
            if let Some(o) = self.open.remove(&key) {
                self.close(attr, key, o);
            }
        }
    }

    /// Everything still open (end of the watch).
    pub fn close_all(&mut self, attr: &mut RunAttribution) {
        self.close_before(attr, Nanos::MAX);
    }

    /// A verdict the engine decided: into its thread's ranking.
    pub fn decided(&mut self, v: &Verdict) {
        let ThreadRole::Watched(tid) = v.stall.thread else {
            return;
        };
        if let Some(kind) = self.kinds.remove(&(tid, v.stall.start_ns, v.stall.cpu)) {
            self.remember_kind(v, kind);
        }
        if let Some(id) = self.holder(tid, v.stall.start_ns) {
            self.thread_mut(id).ranking.add(v);
        }
    }

    /// Keeps the kinds of the longest interruptions only (the reports show the worst).
    fn remember_kind(&mut self, v: &Verdict, kind: InterruptionKind) {
        let ThreadRole::Watched(tid) = v.stall.thread else {
            return;
        };
        self.decided_kinds
            .insert((tid, v.stall.start_ns, v.stall.cpu), kind);
        if self.decided_kinds.len() > 2 * self.keep_kinds {
            // Forget the oldest half: the worst kept by the stall book are looked up at the
            // end; an older one missing shows without its kind.
            let mut keys: Vec<_> = self.decided_kinds.keys().copied().collect();
            keys.sort_by_key(|k| k.1);
            for k in keys.iter().take(self.keep_kinds) {
                self.decided_kinds.remove(k);
            }
        }
    }

    /// The kind of a decided stall, where still known.
    pub fn kind_of(&self, s: &Stall) -> Option<InterruptionKind> {
        let ThreadRole::Watched(tid) = s.thread else {
            return None;
        };
        self.decided_kinds.get(&(tid, s.start_ns, s.cpu)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(cpu: Cpu, class: CulpritClass, start: Nanos, end: Nanos, victim: u32) -> Interruption {
        Interruption {
            cpu,
            class,
            start_ns: start,
            end_ns: end,
            id: 0,
            who: Who::Kthread { comm: "".into() },
            pid: 0,
            parent: None,
            victim,
        }
    }

    fn attr() -> RunAttribution {
        RunAttribution::new(0, Vec::new(), 16, true, true, 0)
    }

    #[test]
    fn back_to_back_records_of_a_run_are_one_interruption() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        b.add_thread(7, 7, 7, "spin", 0);
        b.interruption(&mut a, rec(1, CulpritClass::Irq, 1_000, 3_000, 7));
        b.interruption(&mut a, rec(1, CulpritClass::Softirq, 3_500, 6_000, 7));
        // Far later: a second interruption.
        b.interruption(&mut a, rec(1, CulpritClass::TimerTick, 50_000, 52_000, 7));
        // Not nested in a watched run: not an interruption of its own.
        b.interruption(&mut a, rec(1, CulpritClass::Irq, 60_000, 61_000, 0));
        b.close_all(&mut a);
        let t = &b.thread(b.current(7).unwrap());
        assert_eq!(t.kind(InterruptionKind::OnCpu), (2, 5_000 + 2_000));
        assert_eq!(t.interruptions.len(), 2);
        assert_eq!(t.interruptions.max(), 5_023); // 2 significant digits
    }

    #[test]
    fn a_threads_histograms_start_small_and_hold_the_whole_range() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        b.add_thread(7, 7, 7, "spin", 0);
        let size = |b: &WatchBook| {
            let t = &b.thread(b.current(7).unwrap());
            [
                &t.interruptions,
                &t.wakeups,
                &t.interval_interruptions,
                &t.interval_wakeups,
            ]
            .iter()
            .map(|h| h.distinct_values())
            .sum::<usize>()
        };
        // Slots of 8 bytes: 64 KiB for the four, not 1 MiB.
        assert!(size(&b) * 8 <= 64 << 10, "{} slots", size(&b));
        b.interruption(
            &mut a,
            rec(1, CulpritClass::Irq, 1_000, 2 * HISTOGRAM_MAX_NS, 7),
        );
        b.close_all(&mut a);
        let t = &b.thread(b.current(7).unwrap());
        assert_eq!(t.interruptions.len(), 1);
        assert!(
            t.interruptions.max() >= HISTOGRAM_MAX_NS,
            "held at the range's top"
        );
        assert!(size(&b) * 8 <= 1 << 20, "{} slots", size(&b));
    }

    #[test]
    fn a_thread_that_names_itself_is_named_by_its_new_name() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        // Created by a thread named python3: the kernel gives it its creator's name.
        b.add_thread(9, 9, 7, "python3", 0);
        let wait = |name: &str, start_ns| Wait {
            tid: 9,
            name: name.into(),
            kind: WaitKind::Wakeup,
            start_ns,
            end_ns: start_ns + 1_000,
            from_cpu: 1,
            cpu: 1,
            migrated_ns: None,
        };
        b.wait(&mut a, &wait("python3", 1_000));
        assert_eq!(&*b.thread(b.current(9).unwrap()).name, "python3");
        // prctl(PR_SET_NAME) or /proc/self/comm: its next wait carries the new name.
        b.wait(&mut a, &wait("js-renamed", 5_000));
        assert_eq!(&*b.thread(b.current(9).unwrap()).name, "js-renamed");
        assert_eq!(
            b.thread(b.current(9).unwrap()).wakeups.len(),
            2,
            "one thread, not two"
        );
    }

    fn event(tid: u32, at_ns: Nanos, name: &str, change: ThreadChange) -> ThreadEvent {
        ThreadEvent {
            tid,
            ns_tid: tid,
            ns_pid: 7,
            name: name.into(),
            at_ns,
            change,
        }
    }

    fn woken(tid: u32, name: &str, start_ns: Nanos) -> Wait {
        Wait {
            tid,
            name: name.into(),
            kind: WaitKind::Wakeup,
            start_ns,
            end_ns: start_ns + 1_000,
            from_cpu: 1,
            cpu: 1,
            migrated_ns: None,
        }
    }

    /// The verdict of a stall of kernel tid `tid` that began at `start`, with one culprit.
    fn verdict(tid: u32, start: Nanos) -> Verdict {
        let stall = Stall {
            cpu: 1,
            thread: ThreadRole::Watched(tid),
            start_ns: start,
            end_ns: start + 1_000,
        };
        let share = Share {
            culprit: Culprit {
                class: CulpritClass::Kthread,
                who: Who::Kthread { comm: "k".into() },
            },
            via: None,
            measured_ns: 1_000,
            inferred_ns: 0,
            host_ns: 0,
            episodes: 1,
            longest_ns: 1_000,
            share: 1.0,
        };
        Verdict {
            stall,
            culprits: vec![share],
            explained_share: 1.0,
            incomplete: false,
            timeline: Vec::new(),
            hypervisor: Vec::new(),
        }
    }

    #[test]
    fn a_thread_that_execs_beside_the_main_one_moves_to_its_id_and_the_main_one_stays() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        b.add_thread(7, 7, 7, "python3", 0);
        let created = ThreadChange::Created { by: 7 };
        b.thread_event(&event(9, 100, "python3", created), 7);
        b.wait(&mut a, &woken(7, "python3", 200));
        b.wait(&mut a, &woken(9, "python3", 300));
        // Records from two CPUs: the exec (on the thread's) is taken before the main thread's
        // exit, which happened first.
        let exec = ThreadChange::Exec { old_tid: 9 };
        let applied = b.thread_event(&event(7, 2_000, "after-exec", exec), 7);
        let (t, main) = (applied.thread.unwrap(), applied.retired.unwrap());
        assert_eq!(b.thread(main).exited_ns, Some(2_000), "gone by the exec");
        let exited = ThreadChange::Exited { sched: (5, 6) };
        let applied = b.thread_event(&event(7, 1_500, "python3", exited), 7);
        assert_eq!(applied.thread, Some(main), "the exit is the main thread's");
        assert_eq!(b.thread(main).exited_ns, Some(1_500));
        b.wait(&mut a, &woken(7, "after-exec", 3_000));
        b.wait(&mut a, &woken(7, "after-exec", 4_000));
        // Decided late, each verdict goes to the thread that had the id when it began.
        b.decided(&verdict(9, 300));
        b.decided(&verdict(7, 200));
        b.decided(&verdict(7, 3_000));
        assert_eq!((b.current(7), b.current(9)), (Some(t), None));
        assert_eq!(b.holder(9, 300), Some(t));
        assert_eq!(b.holder(7, 200), Some(main));
        let shown: Vec<(u32, &str, bool, u64, usize)> = b
            .threads()
            .iter()
            .map(|t| {
                let culprits = t.ranking.brief().len();
                let ended = t.exited_ns.is_some();
                (t.tid, t.name.as_str(), ended, t.wakeups.len(), culprits)
            })
            .collect();
        assert_eq!(
            shown,
            [(7, "python3", true, 1, 1), (7, "after-exec", false, 3, 1)]
        );
        assert_eq!(b.thread(t).first_seen_ns, 100, "followed from its creation");
        assert_eq!(b.thread(t).ranking.ranked()[0].episodes, 2);
    }

    #[test]
    fn a_new_thread_with_an_exited_threads_id_is_a_thread_of_its_own() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        let created = ThreadChange::Created { by: 7 };
        let first = b.thread_event(&event(11, 100, "worker", created), 7).thread;
        b.wait(&mut a, &woken(11, "worker", 200));
        let exited = ThreadChange::Exited { sched: (1, 2) };
        b.thread_event(&event(11, 500, "worker", exited), 7);
        let again = b.thread_event(&event(11, 5_000, "worker", created), 7);
        assert_eq!(again.retired, first, "the exited one keeps its figures");
        let second = again.thread;
        assert_ne!(second, first);
        b.wait(&mut a, &woken(11, "worker", 6_000));
        b.wait(&mut a, &woken(11, "worker", 7_000));
        b.decided(&verdict(11, 200));
        assert_eq!(b.holder(11, 200), first);
        assert_eq!(b.holder(11, 6_000), second);
        let (f, s) = (b.thread(first.unwrap()), b.thread(second.unwrap()));
        assert_eq!(
            (f.wakeups.len(), f.exited_ns, f.ranking.brief().len()),
            (1, Some(500), 1)
        );
        assert_eq!(
            (s.wakeups.len(), s.exited_ns, s.ranking.brief().len()),
            (2, None, 0)
        );
        assert_eq!(b.threads().len(), 2);
        // A thread already watched, told of again (found at the start, then created): one.
        assert_eq!(b.add_thread(11, 11, 7, "worker", 8_000), second.unwrap());
        assert_eq!(b.threads().len(), 2);
    }

    #[test]
    fn a_wait_that_migrated_is_two_windows_and_one_delay() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        let w = Wait {
            tid: 9,
            name: "sleeper".into(),
            kind: WaitKind::Wakeup,
            start_ns: 1_000,
            end_ns: 11_000,
            from_cpu: 0,
            cpu: 1,
            migrated_ns: Some(4_000),
        };
        b.wait(&mut a, &w);
        let t = &b.thread(b.current(9).unwrap());
        assert_eq!(&*t.name, "sleeper");
        assert_eq!(t.kind(InterruptionKind::WakeupDelay), (1, 10_000));
        assert_eq!(t.wakeups.len(), 1);
        assert_eq!(t.interruptions.len(), 0);
        a.finish();
        let windows: Vec<(Cpu, Nanos, Nanos)> = a
            .book
            .worst()
            .iter()
            .map(|v| (v.stall.cpu, v.stall.start_ns, v.stall.end_ns))
            .collect();
        assert!(windows.contains(&(0, 1_000, 4_000)), "{windows:?}");
        assert!(windows.contains(&(1, 4_000, 11_000)), "{windows:?}");
    }

    #[test]
    fn steal_while_on_cpu_is_the_threads_measured_host_preemption() {
        let (mut b, mut a) = (WatchBook::new(8), attr());
        b.add_thread(7, 7, 7, "spin", 0);
        b.steal(
            &mut a,
            StealSample {
                cpu: 1,
                from_ns: 1_000,
                to_ns: 900_000,
                steal_ns: 300_000,
                victim: 7,
            },
        );
        let t = &b.thread(b.current(7).unwrap());
        assert_eq!(t.kind(InterruptionKind::Hypervisor), (1, 300_000));
        let r = t.ranking.brief();
        assert_eq!(r[0].class(), CulpritClass::Hypervisor);
        assert_eq!(r[0].measured_ns, 300_000);
    }
}
