//! Deciding at the end (`--attribution end`), what the drain thread gives the live preview
//! while the records wait in the rings: each record it glances at (or takes in before the
//! end), as a `model::Glimpse`, to a sink the session installs (`ProbeConfig::glance`). The
//! probes only tell what the records are; what the preview makes of them is not theirs.

use crate::model::{Culprit, Glimpse, Glimpsed, Nanos};
use crate::platform::fast_hash::FastMap;

use super::abi::Kind;
use super::decode::{class_of, end_unseen, Made};
use super::skel::types::js_record;

/// The live preview, as the drain thread sees it.
pub trait Glance: Send + std::fmt::Debug {
    /// A record, in the order the rings gave them; its time counts from `from_ns` (the run's
    /// window). The drain thread holds the preview's lock for a step of records (a few,
    /// `drain::CONSUME_STEP`).
    fn record(&mut self, from_ns: Nanos, glimpse: &Glimpse<'_>);
    /// A glance, or a drain that took records in for the preview, is over; `complete_to_ns`:
    /// when it began if it read every ring to its end (None if the budget cut it short).
    fn glanced(&mut self, complete_to_ns: Option<Nanos>);
}

/// Records' naming fields remembered with their culprit, at most (then forgotten together:
/// names carry pids and a kworker's flags its item count).
const MADE_KEPT: usize = 4096;

/// Class codes remembered in `Glimpses::last` (`enum js_class`, with room).
const CLASS_CODES: usize = 16;

/// The culprits already named, for the glimpses of the records to come. A record costs the
/// drain thread what it cost before the preview moved: its naming fields compared (or
/// hashed), no name made, copied or counted.
#[derive(Debug, Default)]
pub(super) struct Glimpses {
    /// A record's naming fields to its culprit: the names are made once.
    by_made: FastMap<Made, (Culprit, u64)>,
    /// The last naming seen of each class code, with its culprit: a tick's record is
    /// nearly always named as the tick's before it, and a compare is cheaper than a hash.
    last: [Option<(Made, Culprit, u64)>; CLASS_CODES],
    /// The number the next naming remembered gets (`Glimpsed::Episode::naming`).
    serial: u64,
}

impl Glimpses {
    /// Gives `r` to `sink`, unless it ended before `from_ns` or tells the preview nothing.
    /// `name` gives an interruption record's culprit (`decode::culprit_named`), asked once
    /// for each distinct naming.
    pub(super) fn push(
        &mut self,
        r: &js_record,
        from_ns: Nanos,
        name: &mut dyn FnMut(&js_record) -> Option<Culprit>,
        sink: &mut dyn Glance,
    ) {
        if r.end_ns <= from_ns {
            return;
        }
        let what = match Kind::from_code(r.kind) {
            Some(Kind::Interruption) => {
                let Some(class) = class_of(r.class_) else {
                    return;
                };
                let (culprit, naming) = match self.named(r, name) {
                    Some((c, n)) => (Some(c), n),
                    None => (None, 0),
                };
                Glimpsed::Episode {
                    class,
                    parent: class_of(r.parent),
                    end_unseen: end_unseen(r),
                    culprit,
                    naming,
                }
            }
            Some(Kind::Steal) => Glimpsed::Steal { grown_ns: r.id },
            Some(Kind::Lost) => Glimpsed::Lost { count: r.id },
            _ => return,
        };
        let glimpse = Glimpse {
            cpu: r.cpu,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            what,
        };
        sink.record(from_ns, &glimpse);
    }

    /// The record's culprit and naming number, lent from the remembered ones.
    fn named(
        &mut self,
        r: &js_record,
        name: &mut dyn FnMut(&js_record) -> Option<Culprit>,
    ) -> Option<(&Culprit, u64)> {
        let made = Made::of(r);
        let class = (r.class_ as usize).min(CLASS_CODES - 1);
        if !matches!(&self.last[class], Some((seen, ..)) if *seen == made) {
            let (culprit, n) = match self.by_made.get(&made) {
                Some((c, n)) => (c.clone(), *n),
                None => {
                    let c = name(r)?;
                    if self.by_made.len() >= MADE_KEPT {
                        self.by_made.clear();
                    }
                    self.serial += 1;
                    self.by_made.insert(made, (c.clone(), self.serial));
                    (c, self.serial)
                }
            };
            self.last[class] = Some((made, culprit, n));
        }
        self.last[class].as_ref().map(|(_, c, n)| (c, *n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CulpritClass, Who};
    use crate::probe::abi::{Class, F_END_UNSEEN};

    fn ep(
        class: Class,
        name: &str,
        (start_ns, end_ns): (Nanos, Nanos),
        parent: Class,
    ) -> js_record {
        let mut r = js_record {
            kind: Kind::Interruption as u32,
            start_ns,
            end_ns,
            class_: class as u16,
            parent: parent as u16,
            ..Default::default()
        };
        for (d, s) in r.name.iter_mut().zip(name.bytes()) {
            *d = s as i8;
        }
        r
    }

    fn namer(r: &js_record) -> Option<Culprit> {
        let name: String = r
            .name
            .iter()
            .take_while(|&&b| b != 0)
            .map(|&b| b as u8 as char)
            .collect();
        Some(Culprit {
            class: class_of(r.class_)?,
            who: Who::Kthread { comm: name.into() },
        })
    }

    /// A preview that keeps what it is given (the culprit copied out of its loan).
    #[derive(Debug, Default)]
    struct Seen(Vec<(Glimpsed<'static>, Option<Culprit>)>);

    impl Glance for Seen {
        fn record(&mut self, _from_ns: Nanos, g: &Glimpse<'_>) {
            self.0.push(match g.what {
                Glimpsed::Episode {
                    class,
                    parent,
                    end_unseen,
                    culprit,
                    naming,
                } => (
                    Glimpsed::Episode {
                        class,
                        parent,
                        end_unseen,
                        culprit: None,
                        naming,
                    },
                    culprit.cloned(),
                ),
                Glimpsed::Steal { grown_ns } => (Glimpsed::Steal { grown_ns }, None),
                Glimpsed::Lost { count } => (Glimpsed::Lost { count }, None),
            });
        }

        fn glanced(&mut self, _complete_to_ns: Option<Nanos>) {}
    }

    #[test]
    fn names_are_made_once_per_naming_and_unnamed_records_are_kept_unnamed() {
        let (mut g, mut seen) = (Glimpses::default(), Seen::default());
        let mut asked = 0;
        for k in 0..5u64 {
            let r = ep(Class::Softirq, "TIMER", (k * 10, k * 10 + 5), Class::None);
            let mut name = |r: &js_record| {
                asked += 1;
                namer(r)
            };
            g.push(&r, 0, &mut name, &mut seen);
        }
        let nameless = ep(Class::Irq, "nameless", (100, 200), Class::None);
        g.push(&nameless, 0, &mut |_| None, &mut seen);
        assert_eq!(asked, 1);
        assert_eq!(seen.0.len(), 6);
        let named = |i: usize| seen.0[i].1.clone();
        assert_eq!(named(4).map(|c| c.class), Some(CulpritClass::Softirq));
        assert_eq!(named(5), None);
    }

    #[test]
    fn a_record_is_told_by_its_kind_and_those_before_the_window_are_left_out() {
        let (mut g, mut seen) = (Glimpses::default(), Seen::default());
        let mut unseen = ep(Class::Task, "t", (1000, 5000), Class::None);
        unseen.flags = F_END_UNSEEN;
        let tick = ep(Class::Hrtimer, "cb", (1500, 1510), Class::TimerTick);
        let counted = |kind: Kind, id| js_record {
            kind: kind as u32,
            start_ns: 2000,
            end_ns: 3000,
            id,
            ..Default::default()
        };
        let before = ep(Class::Irq, "early", (10, 20), Class::None);
        for r in [
            unseen,
            tick,
            counted(Kind::Steal, 250),
            counted(Kind::Lost, 7),
            before,
        ] {
            g.push(&r, 100, &mut namer, &mut seen);
        }
        let whats: Vec<_> = seen.0.iter().map(|s| s.0).collect();
        assert!(matches!(
            &whats[0],
            Glimpsed::Episode {
                class: CulpritClass::Task,
                parent: None,
                end_unseen: true,
                ..
            }
        ));
        assert!(matches!(
            &whats[1],
            Glimpsed::Episode {
                class: CulpritClass::TimerTick,
                parent: Some(CulpritClass::TimerTick),
                end_unseen: false,
                ..
            }
        ));
        assert_eq!(whats[2], Glimpsed::Steal { grown_ns: 250 });
        assert_eq!(whats[3], Glimpsed::Lost { count: 7 });
        assert_eq!(
            whats.len(),
            4,
            "the record that ended before the window is left out"
        );
    }
}
