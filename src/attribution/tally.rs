//! Deciding at the end (`--attribution end`), the kernel's time on the measured CPUs so far,
//! by culprit: what the live view shows while the stalls wait for the end. The probes' drain
//! thread glances at the records where they wait in the rings, once a second, and hands each
//! to the live preview (`preview`) as a `model::Glimpse`; the tally adds up each episode's own
//! time — its length less that of the episodes nested in it, as the engine's sweep gives it
//! — under the culprit it names; a steal record adds the host's time. Every CPU it covers runs a spinning workload thread, so that time was taken from
//! one: measured inside kernel records, but not yet matched to the stalls the workload saw
//! (entry/exit time and unexplained gaps come only with the decisions at the end).

use crate::model::{Cpu, Culprit, CulpritClass, Glimpse, Glimpsed, Nanos, Who};
use crate::platform::fast_hash::FastMap;

use super::nesting::Nesting;
use super::recent::{Piece, RecentKernel, LONG_NS};

/// Culprits given to the live view, at most (a terminal shows fewer: it sorts them its own
/// ways).
pub const LISTED: usize = 50;

/// A culprit's kernel time so far.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCulprit {
    pub culprit: Culprit,
    pub episodes: u64,
    /// Its episodes' own time inside the window (nested episodes left to their own culprits).
    pub ns: Nanos,
    pub longest_ns: Nanos,
    /// When its latest episode ended (CLOCK_MONOTONIC).
    pub last_ns: Nanos,
}

/// What the live view is given: the culprits with the most time, and the totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KernelTime {
    pub culprits: Vec<KernelCulprit>,
    /// Every culprit's time together (not only the listed ones').
    pub total_ns: Nanos,
    /// Records lost on the measured CPUs so far (their time is missing here).
    pub lost: u64,
    /// Task runs whose end the probes did not see, left out (see `KernelTally::add`).
    pub end_unseen: u64,
}

/// A record's culprit, as the decoder names it.
pub type Naming = Culprit;

/// Episodes ended and not yet claimed by the episode they are nested in, per CPU, at most:
/// one whose enclosing episode never comes (it began before the probes) is dropped with the
/// oldest.
const UNCLAIMED_KEPT: usize = 256;

/// Culprits told apart, at most (the rest of each class share a row, `Who::Others`).
pub(super) const CULPRITS_KEPT: usize = 4096;

/// The kernel's largest `NR_CPUS`.
const MAX_CPUS: usize = 8192;

/// Namings remembered with their culprit's place, at most (then forgotten together).
const NAMINGS_KEPT: usize = 4096;

/// Classes remembered in `KernelTally::last` (`CulpritClass`, with room).
const CLASSES: usize = 16;

/// A nested episode waiting for its enclosing one: its rank under the nesting rule, its span.
#[derive(Debug, Clone, Copy)]
struct Nested {
    rank: Nesting,
    start_ns: Nanos,
    end_ns: Nanos,
}

/// The running sums (see the module's text).
#[derive(Debug, Default)]
pub struct KernelTally {
    culprits: Vec<KernelCulprit>,
    index: FastMap<Naming, usize>,
    /// A record's naming (`Glimpsed::Episode::naming`) to its culprit's place: the
    /// culprit is looked up once.
    by_naming: FastMap<u64, usize>,
    /// The last naming seen of each record class, with its culprit's place: a tick's record
    /// is nearly always named as the tick's before it, and a compare is cheaper than a hash.
    last: [Option<(u64, usize)>; CLASSES],
    /// Per CPU (its number), the nested episodes not yet claimed.
    nested: Vec<Vec<Nested>>,
    total_ns: Nanos,
    lost: u64,
    end_unseen: u64,
    /// The culprits credited since the last `top` (a place may repeat), and the places it
    /// listed: a culprit's time only grows, so the next top is among the two.
    credited: Vec<usize>,
    listed: Vec<usize>,
}

/// A piece of an episode for the spike windows (`recent`), naming its culprit there first if
/// it is new.
fn piece(
    recent: &mut Option<&mut RecentKernel>,
    culprits: &[KernelCulprit],
    cpu: Cpu,
    (piece, of_long): (Piece, bool),
) {
    let Some(r) = recent.as_deref_mut() else {
        return;
    };
    while r.named() <= piece.culprit as usize {
        let Some(c) = culprits.get(r.named()) else {
            return;
        };
        r.name(c.culprit.clone());
    }
    r.push(cpu, piece, of_long);
}

/// A piece of `span` credited to (`debit`: taken off) culprit `at`, and whether its episode
/// (that of `parent`, for a debit) is a long one (`recent::LONG_NS`).
fn piece_of(span: (Nanos, Nanos), at: usize, debit: bool, parent: (Nanos, Nanos)) -> (Piece, bool) {
    let piece = Piece::new(span, span.1 - span.0, at as u32, debit);
    (piece, parent.1 - parent.0 > LONG_NS)
}

/// An episode's record as the tally takes it.
struct Episode<'a> {
    cpu: Cpu,
    /// Its rank under the nesting rule (`Nesting`).
    rank: Nesting,
    start_ns: Nanos,
    end_ns: Nanos,
    culprit: Option<&'a Culprit>,
    naming: u64,
}

impl KernelTally {
    /// Adds a record; only its time from `from_ns` on counts (the run's window). A task's
    /// run whose closing switch the probes did not see (`Glimpsed::Episode::end_unseen`)
    /// holds the workload's own run too: its time is left out and the run counted apart
    /// (the stalls decided at the end take only what overlaps them, as from any record).
    /// With `recent`, the record's pieces go there too, for the live view's spike windows.
    pub fn add(&mut self, g: &Glimpse<'_>, from_ns: Nanos, mut recent: Option<&mut RecentKernel>) {
        // A CPU number past the kernel's largest `NR_CPUS` is no record of a measured CPU.
        if g.end_ns <= from_ns || g.cpu as usize >= MAX_CPUS {
            return;
        }
        match &g.what {
            Glimpsed::Episode {
                class,
                parent,
                end_unseen,
                culprit,
                naming,
            } => {
                let e = Episode {
                    cpu: g.cpu,
                    rank: Nesting::of(*class, *parent, (g.start_ns, g.end_ns.max(g.start_ns))),
                    start_ns: g.start_ns,
                    end_ns: g.end_ns,
                    culprit: *culprit,
                    naming: *naming,
                };
                // What the probes took as nested in a run whose end was not seen (the timer
                // ticks of the workload's run it holds among them) goes to its own culprits,
                // as always. A spike's window has none of the workload's run in it (the
                // thread would have taken the message): there, the run's time is kept
                // (`recent`).
                self.interruption(&e, parent.is_some(), from_ns, !end_unseen, &mut recent);
                if *end_unseen {
                    self.end_unseen += 1;
                }
            }
            Glimpsed::Steal { grown_ns } if *grown_ns > 0 => {
                let at = self.culprit(Culprit {
                    class: CulpritClass::Hypervisor,
                    who: Who::Host { cpu: g.cpu },
                });
                self.credit(at, *grown_ns, g.end_ns);
                let span = (g.start_ns, g.end_ns.max(g.start_ns));
                let grown = (*grown_ns).min(span.1 - span.0);
                let steal = Piece::new(span, grown, at as u32, false);
                // Its span runs from the probes' read before to this one: often long.
                let long = span.1 - span.0 > LONG_NS;
                piece(&mut recent, &self.culprits, g.cpu, (steal, long));
            }
            Glimpsed::Lost { count } => self.lost += count,
            Glimpsed::Steal { .. } => {}
        }
    }

    /// `counted`: into the culprit's time (else only the pieces kept for spike windows).
    /// `nested`: the probes saw it begin inside another episode, which claims it.
    fn interruption(
        &mut self,
        r: &Episode,
        nested: bool,
        from_ns: Nanos,
        counted: bool,
        recent: &mut Option<&mut RecentKernel>,
    ) {
        if !counted && recent.is_none() {
            self.claim(r, from_ns, None, recent);
            return;
        }
        let Some(naming) = r.culprit else {
            if !counted {
                self.claim(r, from_ns, None, recent);
            }
            return;
        };
        let class = (naming.class as usize).min(CLASSES - 1);
        let at = match self.last[class] {
            Some((seen, at)) if seen == r.naming => at,
            _ => {
                let at = match self.by_naming.get(&r.naming) {
                    Some(&at) => at,
                    None => {
                        let at = self.culprit(naming.clone());
                        if self.by_naming.len() >= NAMINGS_KEPT {
                            self.by_naming.clear();
                        }
                        self.by_naming.insert(r.naming, at);
                        at
                    }
                };
                self.last[class] = Some((r.naming, at));
                at
            }
        };
        let (start, end) = (r.start_ns.max(from_ns), r.end_ns.max(r.start_ns));
        let inside = self.claim(r, from_ns, Some(at), recent);
        let span = (r.start_ns, end);
        piece(
            recent,
            &self.culprits,
            r.cpu,
            piece_of(span, at, false, span),
        );
        if !counted {
            return;
        }
        let waiting = &mut self.nested[r.cpu as usize];
        if nested {
            if waiting.len() == UNCLAIMED_KEPT {
                waiting.remove(0);
            }
            waiting.push(Nested {
                rank: r.rank,
                start_ns: r.start_ns,
                end_ns: end,
            });
        }
        self.credit(at, (end - start).saturating_sub(inside), end);
    }

    /// Takes the episodes nested in `r` off its CPU's waiting list; returns their time in
    /// the window. Records of a CPU come in the order their episodes ended: what is nested in
    /// one came before it, and takes its time from it by the engine's nesting rule
    /// (`Nesting::inside`). With `r`'s culprit (`of`), each is a piece taken off it.
    fn claim(
        &mut self,
        r: &Episode,
        from_ns: Nanos,
        of: Option<usize>,
        recent: &mut Option<&mut RecentKernel>,
    ) -> Nanos {
        let cpu = r.cpu as usize;
        if self.nested.len() <= cpu {
            self.nested.resize_with(cpu + 1, Vec::new);
        }
        let (start, end) = (r.start_ns.max(from_ns), r.end_ns.max(r.start_ns));
        let mut inside: Nanos = 0;
        let debit_of = if recent.is_some() { of } else { None };
        let culprits = &self.culprits;
        self.nested[cpu].retain(|n| {
            let claimed = n.rank.inside(&r.rank);
            if claimed {
                inside += n.end_ns - n.start_ns.max(start).min(n.end_ns);
                if let Some(at) = debit_of {
                    let debit = piece_of((n.start_ns, n.end_ns), at, true, (r.start_ns, end));
                    piece(recent, culprits, r.cpu, debit);
                }
            }
            !claimed
        });
        inside
    }

    /// The culprit's place, made on first sight; past `CULPRITS_KEPT` culprits, a new one is
    /// counted in its class's `others` row (names carry pids: a loop forking short tasks
    /// would grow the list without end).
    fn culprit(&mut self, key: Naming) -> usize {
        if let Some(&at) = self.index.get(&key) {
            return at;
        }
        let key = match self.culprits.len() < CULPRITS_KEPT {
            true => key,
            false => {
                let others = Culprit {
                    class: key.class,
                    who: Who::Others,
                };
                if let Some(&at) = self.index.get(&others) {
                    return at;
                }
                others
            }
        };
        self.culprits.push(KernelCulprit {
            culprit: key.clone(),
            episodes: 0,
            ns: 0,
            longest_ns: 0,
            last_ns: 0,
        });
        self.index.insert(key, self.culprits.len() - 1);
        self.culprits.len() - 1
    }

    fn credit(&mut self, at: usize, ns: Nanos, end_ns: Nanos) {
        let c = &mut self.culprits[at];
        if self.credited.last() != Some(&at) {
            if self.credited.len() >= 2 * CULPRITS_KEPT {
                // Bounded however long nobody asks for the top.
                self.credited.sort_unstable();
                self.credited.dedup();
            }
            self.credited.push(at);
        }
        c.episodes += 1;
        c.ns += ns;
        c.longest_ns = c.longest_ns.max(ns);
        c.last_ns = c.last_ns.max(end_ns);
        self.total_ns += ns;
    }

    /// The `n` culprits with the most time, most first, and the totals. The work is the
    /// culprits credited since the last call and those it listed, not every culprit known:
    /// time only grows, so one neither credited nor listed then cannot rise into the list
    /// (asked for the same `n` each time; a larger `n` than before looks at them all).
    pub fn top(&mut self, n: usize) -> KernelTime {
        let mut order = std::mem::take(&mut self.credited);
        if n > self.listed.len() && self.listed.len() < self.culprits.len() {
            // Nothing listed was left out last time only if the list was not full.
            order.clear();
            order.extend(0..self.culprits.len());
        } else {
            order.extend_from_slice(&self.listed);
        }
        // A culprit named only for the spike windows (a run whose end was not seen) has no
        // time here.
        order.retain(|&i| self.culprits[i].episodes > 0);
        order.sort_unstable();
        order.dedup();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.culprits[i].ns), i));
        order.truncate(n);
        self.listed.clear();
        self.listed.extend_from_slice(&order);
        // The allocation kept for the next credits.
        self.credited = order;
        self.credited.clear();
        KernelTime {
            culprits: self
                .listed
                .iter()
                .map(|&i| self.culprits[i].clone())
                .collect(),
            total_ns: self.total_ns,
            lost: self.lost,
            end_unseen: self.end_unseen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CulpritClass as C;

    /// An episode of `class` named `name` (its culprit is of the same class, a kernel thread
    /// by that name), nested in an episode of `parent`.
    fn ep(
        cpu: u32,
        class: C,
        name: &str,
        (start_ns, end_ns): (Nanos, Nanos),
        parent: Option<C>,
    ) -> Glimpse<'static> {
        // Lent for the test's length, as the drain thread lends it for a step.
        let culprit = Box::leak(Box::new(Culprit {
            class,
            who: Who::Kthread { comm: name.into() },
        }));
        Glimpse {
            cpu,
            start_ns,
            end_ns,
            what: Glimpsed::Episode {
                class,
                parent,
                end_unseen: false,
                culprit: Some(culprit),
                // A number of its own for each name (and class).
                naming: name
                    .bytes()
                    .fold(class as u64 + 1, |n, b| n.wrapping_mul(131) + b as u64),
            },
        }
    }

    /// The same, a run whose closing switch the probes did not see.
    fn unseen(g: Glimpse<'static>) -> Glimpse<'static> {
        let what = match g.what {
            Glimpsed::Episode {
                class,
                parent,
                culprit,
                naming,
                ..
            } => Glimpsed::Episode {
                class,
                parent,
                end_unseen: true,
                culprit,
                naming,
            },
            other => other,
        };
        Glimpse { what, ..g }
    }

    /// A steal (the clock grew `by`) or lost (`by` records) record of CPU `cpu`.
    fn counted(
        cpu: u32,
        (start_ns, end_ns): (Nanos, Nanos),
        what: Glimpsed<'static>,
    ) -> Glimpse<'static> {
        Glimpse {
            cpu,
            start_ns,
            end_ns,
            what,
        }
    }

    /// What the tests name the host's row and the others' row.
    const HOST: &str = "host";
    const OTHERS: &str = "others";

    /// A culprit by the name the test's namer gave it.
    fn shown(c: &Culprit) -> String {
        match &c.who {
            Who::Kthread { comm } => comm.to_string(),
            Who::Host { .. } => HOST.to_string(),
            Who::Others => OTHERS.to_string(),
            other => format!("{other:?}"),
        }
    }

    fn add_all(t: &mut KernelTally, records: &[Glimpse], from: Nanos) {
        for r in records {
            t.add(r, from, None);
        }
    }

    fn ns_of(t: &KernelTime, name: &str) -> Option<Nanos> {
        t.culprits
            .iter()
            .find(|c| shown(&c.culprit) == name)
            .map(|c| c.ns)
    }

    /// The top looked up from what was credited since the last call and what it listed is
    /// the top of every culprit, call after call, whichever culprits rise and fall.
    #[test]
    fn the_top_from_what_changed_is_the_top_of_all() {
        let mut t = KernelTally::default();
        let mut seed = 7u64;
        let mut at = 1_000;
        for round in 0..200 {
            for _ in 0..(round % 7) * 3 + 1 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Forty culprits; each round favours a few, which overtake the list.
                let who = (seed >> 33) % 40;
                let ns = 1 + (seed >> 20) % (if who % 9 == round % 9 { 5_000 } else { 100 });
                t.add(
                    &ep(0, C::Kthread, &format!("k{who}"), (at, at + ns), None),
                    0,
                    None,
                );
                at += ns + 1;
            }
            let mut all: Vec<&KernelCulprit> =
                t.culprits.iter().filter(|c| c.episodes > 0).collect();
            all.sort_by_key(|c| std::cmp::Reverse(c.ns));
            let expected: Vec<Nanos> = all.iter().take(5).map(|c| c.ns).collect();
            let got: Vec<Nanos> = t.top(5).culprits.iter().map(|c| c.ns).collect();
            assert_eq!(got, expected, "round {round}");
        }
    }

    #[test]
    fn nested_episodes_keep_their_own_time_and_leave_the_rest_to_what_encloses_them() {
        use C::*;
        let mut t = KernelTally::default();
        // A kworker run 1000–2000 with an IRQ 1100–1150 inside, and a tick 1500–1520 whose
        // hrtimer callback 1505–1515 held a nested IRQ 1507–1509. CPU 1 has its own.
        add_all(
            &mut t,
            &[
                ep(0, Irq, "irq", (1100, 1150), Some(Kworker)),
                ep(0, Irq, "irq", (1507, 1509), Some(TimerTick)),
                ep(1, Softirq, "TIMER", (1200, 1300), None),
                ep(0, TimerTick, "callback", (1505, 1515), Some(TimerTick)),
                ep(0, TimerTick, "local timer", (1500, 1520), Some(Kworker)),
                ep(0, Kworker, "kworker/0:1", (1000, 2000), None),
            ],
            0,
        );
        let top = t.top(10);
        assert_eq!(ns_of(&top, "irq"), Some(52));
        assert_eq!(ns_of(&top, "callback"), Some(8));
        assert_eq!(ns_of(&top, "local timer"), Some(10));
        assert_eq!(ns_of(&top, "kworker/0:1"), Some(930));
        assert_eq!(ns_of(&top, "TIMER"), Some(100));
        assert_eq!(top.total_ns, 1000 + 100, "every ns once");
        assert_eq!(shown(&top.culprits[0].culprit), "kworker/0:1");
        let irq = top
            .culprits
            .iter()
            .find(|c| shown(&c.culprit) == "irq")
            .unwrap();
        assert_eq!((irq.episodes, irq.longest_ns, irq.last_ns), (2, 50, 1509));
    }

    #[test]
    fn only_time_inside_the_window_counts_and_the_host_and_lost_records_are_kept() {
        use C::*;
        let mut t = KernelTally::default();
        // A run whose end was not seen: its span holds the workload's own run too, and the
        // ticks the probes took as nested in it.
        let unseen = unseen(ep(0, Task, "unseen", (1000, 41000), None));
        let tick = ep(0, TimerTick, "local timer", (20000, 20010), Some(Task));
        // The steal clock grew 250 ns, and 7 records were lost.
        let steal = counted(0, (1100, 1400), Glimpsed::Steal { grown_ns: 250 });
        let lost = counted(0, (1400, 1500), Glimpsed::Lost { count: 7 });
        add_all(
            &mut t,
            &[
                ep(0, Kthread, "before", (100, 900), None),
                ep(0, Kthread, "across", (900, 1300), None),
                tick,
                unseen,
                steal,
                lost,
            ],
            1000,
        );
        let top = t.top(1);
        assert_eq!(top.culprits.len(), 1, "the first only");
        assert_eq!(shown(&top.culprits[0].culprit), "across");
        assert_eq!(top.culprits[0].ns, 300);
        assert_eq!(top.total_ns, 300 + 10 + 250);
        assert_eq!((top.lost, top.end_unseen), (7, 1));
        assert!(
            t.nested[0].is_empty(),
            "the tick was claimed by the run it was nested in"
        );
        let all = t.top(10);
        assert_eq!(ns_of(&all, HOST), Some(250));
        assert_eq!(ns_of(&all, "before"), Option::None);
        assert_eq!(ns_of(&all, "unseen"), Option::None);
        assert_eq!(ns_of(&all, "local timer"), Some(10));
    }

    #[test]
    fn a_long_steal_span_is_found_by_a_window_well_before_its_end() {
        // Steal read 2 ms apart that grew 400 µs: a window of its first 100 µs, 1.9 ms before
        // the record's end, gets its share (kept with the long pieces, as a long run is).
        let mut r = RecentKernel::with_room(&[0]);
        let mut t = KernelTally::default();
        let steal = counted(
            0,
            (1_000_000, 3_000_000),
            Glimpsed::Steal { grown_ns: 400_000 },
        );
        t.add(&steal, 0, Some(&mut r));
        r.glanced(Some(4_000_000));
        assert_eq!(r.window(0, 1_000_000, 1_100_000).total_ns(), 20_000);
    }

    #[test]
    fn kept_pieces_give_a_window_each_culprits_own_time_and_an_unseen_end_only_there() {
        use C::*;
        let mut r = RecentKernel::with_room(&[0, 1]);
        let mut t = KernelTally::default();
        // A kworker 1000–2000 with an IRQ 1100–1150 nested in it; a task run 3000–5000 whose
        // closing switch was not seen, with a tick 3500–3510 nested in it; steal 6000–7000
        // that grew 400.
        let unseen = unseen(ep(1, Task, "unseen", (3000, 5000), None));
        let steal = counted(1, (6000, 7000), Glimpsed::Steal { grown_ns: 400 });
        for record in [
            ep(0, Irq, "irq", (1100, 1150), Some(Kworker)),
            ep(0, Kworker, "kworker/0:1", (1000, 2000), None),
            ep(1, TimerTick, "local timer", (3500, 3510), Some(Task)),
            unseen,
            steal,
        ] {
            t.add(&record, 0, Some(&mut r));
        }
        r.glanced(Some(8000));
        assert_eq!(r.complete_to_ns(), 8000);
        let names = |w: super::super::recent::WindowTime| -> Vec<(String, Nanos)> {
            w.culprits
                .into_iter()
                .map(|(n, ns)| (shown(&n), ns))
                .collect()
        };
        assert_eq!(
            names(r.window(0, 1000, 1500)),
            vec![("kworker/0:1".into(), 450), ("irq".into(), 50)]
        );
        assert_eq!(
            names(r.window(1, 3400, 3600)),
            vec![("unseen".into(), 190), ("local timer".into(), 10)]
        );
        assert_eq!(names(r.window(1, 6500, 7000)), vec![(HOST.into(), 200)]);
        // The run whose end was not seen has no time of its own in the tally.
        let top = t.top(10);
        assert_eq!(ns_of(&top, "unseen"), Option::None);
        assert_eq!(top.total_ns, 1000 + 10 + 400);
        assert_eq!(top.end_unseen, 1);
    }

    #[test]
    fn an_episode_whose_enclosing_record_is_skipped_is_claimed_by_the_one_around_both() {
        use C::*;
        let mut t = KernelTally::default();
        // A kworker 1000–2000 interrupted by an IRQ 1100–1200 that could not be named,
        // during which an NMI 1150–1160 ran: the NMI's time is its own, once (the engine's
        // sweep gives the kworker what neither covers).
        let mut nameless = ep(0, Irq, "nameless", (1100, 1200), Some(Kworker));
        if let Glimpsed::Episode { culprit, .. } = &mut nameless.what {
            *culprit = None;
        }
        add_all(
            &mut t,
            &[
                ep(0, Nmi, "nmi", (1150, 1160), Some(Irq)),
                nameless,
                ep(0, Kworker, "kworker/0:1", (1000, 2000), None),
            ],
            0,
        );
        let top = t.top(10);
        assert_eq!(ns_of(&top, "nmi"), Some(10));
        assert_eq!(ns_of(&top, "kworker/0:1"), Some(990));
        assert_eq!(top.total_ns, 1000, "every ns once");
        assert!(t.nested[0].is_empty());
    }

    #[test]
    fn unnamed_records_are_skipped() {
        let mut t = KernelTally::default();
        let mut nameless = ep(0, C::Irq, "nameless", (100, 200), None);
        if let Glimpsed::Episode { culprit, .. } = &mut nameless.what {
            *culprit = None;
        }
        add_all(
            &mut t,
            &[ep(0, C::Softirq, "TIMER", (0, 5), None), nameless],
            0,
        );
        assert_eq!(t.top(10).total_ns, 5);
    }

    #[test]
    fn culprits_past_those_told_apart_share_their_classs_row() {
        let mut t = KernelTally::default();
        let n = CULPRITS_KEPT as u64 + 3;
        for k in 0..n {
            let name = format!("task{k}");
            add_all(
                &mut t,
                &[ep(0, C::Task, &name, (k * 10, k * 10 + 5), None)],
                0,
            );
        }
        let top = t.top(usize::MAX);
        assert_eq!(top.culprits.len(), CULPRITS_KEPT + 1);
        assert_eq!(ns_of(&top, OTHERS), Some(15));
        assert_eq!(top.total_ns, 5 * n, "every ns still counted");
    }

    #[test]
    fn a_nested_episode_whose_encloser_never_comes_is_not_kept_for_ever() {
        let mut t = KernelTally::default();
        for k in 0..(UNCLAIMED_KEPT as u64 + 10) {
            add_all(
                &mut t,
                &[ep(0, C::Irq, "irq", (k * 10, k * 10 + 5), Some(C::Task))],
                0,
            );
        }
        assert_eq!(t.nested[0].len(), UNCLAIMED_KEPT);
        assert_eq!(t.top(1).total_ns, 5 * (UNCLAIMED_KEPT as u64 + 10));
    }
}
