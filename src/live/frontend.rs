//! What a run shows while it records: the live terminal view, one plain line a second, or
//! nothing (the workshop's steps). The session hands the running model to its `Frontend`
//! when one is due; the live view owns its own state (pause, sort, help) and keys.

use std::io::Write;

use super::model::LiveModel;
use super::terminal::{Action, LiveTerminal};
use crate::model::Nanos;
use crate::platform::pace::Pacer;

/// What the user asked for while the model was shown.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    /// End the run now (`q` in the live view).
    pub quit: bool,
    /// Start the view's histograms afresh (`r`).
    pub reset: bool,
}

/// What of the running model a frontend shows: only that is brought up to date (the
/// collector may share a measured CPU with the workload, and every row, line and percentile
/// it makes for nobody is time taken from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Culprit rows, the most stolen time first (the plain line shows the first).
    pub culprits: usize,
    /// The feed of recent spikes.
    pub feed: bool,
    /// Transit over the whole run (or since the view's reset), beside the last interval's.
    pub run_totals: bool,
    /// The probes' BPF cost so far.
    pub bpf_cost: bool,
    /// The latest interval's percentiles (deciding at the end they are read apart from the
    /// interval, which waits for the end).
    pub intervals: bool,
}

impl Needs {
    /// The live view shows it all.
    pub const EVERYTHING: Needs = Needs {
        culprits: usize::MAX,
        feed: true,
        run_totals: true,
        bpf_cost: true,
        intervals: true,
    };
    /// The run's plain progress line: the last interval's transit, the stall count, the top
    /// culprit.
    pub const PLAIN_LINE: Needs = Needs {
        culprits: 1,
        feed: false,
        run_totals: false,
        bpf_cost: false,
        intervals: true,
    };
    /// Nothing is shown while the run goes on (the workshop's steps, a watch's metrics).
    pub const NOTHING: Needs = Needs {
        culprits: 0,
        feed: false,
        run_totals: false,
        bpf_cost: false,
        intervals: false,
    };
    /// A watch's plain line: each thread's interruptions so far, the top culprit.
    pub const PLAIN_WATCH_LINE: Needs = Needs {
        run_totals: true,
        ..Needs::PLAIN_LINE
    };
}

pub trait Frontend {
    /// Whether `show` is due at `now` (the model is only brought up to date then).
    fn due(&self, now: Nanos) -> bool;
    /// What `show` reads of the model.
    fn needs(&self) -> Needs {
        Needs::EVERYTHING
    }
    /// Shows the model, its work paced by `pacer` (the collector's: it may share a measured
    /// CPU); notes go to `out` (the terminal going away, …).
    fn show(
        &mut self,
        now: Nanos,
        model: &LiveModel,
        pacer: &mut Pacer,
        out: &mut dyn Write,
    ) -> Asked;
    /// Leaves the screen before the report is printed (idempotent).
    fn close(&mut self) {}
}

/// Nothing while recording: the report at the end is all (the workshop's steps).
pub struct Silent;

impl Frontend for Silent {
    fn due(&self, _now: Nanos) -> bool {
        false
    }

    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    fn show(&mut self, _: Nanos, _: &LiveModel, _: &mut Pacer, _: &mut dyn Write) -> Asked {
        Asked::default()
    }
}

/// How much before its time a line or a frame may still be shown: the collector's turns come
/// on the drain thread's schedule, not the view's, a few ms either side of it (a turn that
/// came just early would otherwise leave the view a whole turn late).
const DUE_EARLY_NS: Nanos = 100_000_000;

/// When the next line or frame is due, one was shown at `now`, every `period_ns`.
fn next_due(now: Nanos, period_ns: Nanos) -> Nanos {
    now + period_ns - DUE_EARLY_NS.min(period_ns / 2)
}

/// Plain lines come at most this often: at each turn of the collector a second or more after
/// the last (every turn when turns are a second or longer apart).
const LINE_NS: Nanos = 1_000_000_000;

/// One progress line a turn, at most one a second, until `end_ns` (standard output is not a
/// terminal).
pub struct PlainLines {
    next_ns: Nanos,
    end_ns: Nanos,
    needs: Needs,
}

impl PlainLines {
    /// A run's lines, from a second after `record_from_ns` until `end_ns`.
    pub fn new(record_from_ns: Nanos, end_ns: Nanos) -> Self {
        PlainLines {
            next_ns: next_due(record_from_ns, LINE_NS),
            end_ns,
            needs: Needs::PLAIN_LINE,
        }
    }

    /// A watch's lines (per-thread totals), from one second after `from_ns` until `end_ns`.
    pub fn watch(from_ns: Nanos, end_ns: Nanos) -> Self {
        PlainLines {
            needs: Needs::PLAIN_WATCH_LINE,
            ..PlainLines::new(from_ns, end_ns)
        }
    }
}

impl Frontend for PlainLines {
    fn due(&self, now: Nanos) -> bool {
        now >= self.next_ns && now < self.end_ns
    }

    fn needs(&self) -> Needs {
        self.needs
    }

    fn show(&mut self, now: Nanos, model: &LiveModel, _: &mut Pacer, out: &mut dyn Write) -> Asked {
        self.next_ns = next_due(now, LINE_NS);
        let _ = writeln!(out, "{}", model.plain_line());
        let _ = out.flush();
        Asked::default()
    }
}

/// The ratatui view. When its terminal goes away it says so once and carries on as plain
/// lines.
pub struct LiveView {
    screen: Option<LiveTerminal>,
    fallback: PlainLines,
    refresh_ns: Nanos,
    next_frame: Nanos,
    paused: bool,
    /// The model as it was when paused.
    frozen: Option<LiveModel>,
    sort: super::SortKey,
    help: bool,
}

impl LiveView {
    /// Enters the alternate screen; a refresh every `refresh_ns`.
    pub fn enter(refresh_ns: Nanos, fallback: PlainLines) -> std::io::Result<LiveView> {
        Ok(LiveView {
            screen: Some(LiveTerminal::enter()?),
            fallback,
            refresh_ns,
            next_frame: 0,
            paused: false,
            frozen: None,
            sort: super::SortKey::default(),
            help: false,
        })
    }

    fn leave(&mut self, out: &mut dyn Write, e: &dyn std::fmt::Display) {
        self.screen = None;
        let _ = writeln!(
            out,
            "note: the live view stopped ({e}); plain output instead"
        );
    }

    fn keys(&mut self, actions: Vec<Action>, model: &LiveModel) -> Asked {
        let mut asked = Asked::default();
        for action in actions {
            match action {
                Action::Quit => asked.quit = true,
                Action::TogglePause => {
                    self.paused = !self.paused;
                    self.frozen = self.paused.then(|| model.clone());
                }
                Action::NextSort => self.sort = self.sort.next(),
                Action::Reset => asked.reset = true,
                Action::ToggleHelp => self.help = !self.help,
            }
        }
        asked
    }
}

impl Frontend for LiveView {
    fn due(&self, now: Nanos) -> bool {
        match self.screen {
            // A key waiting is answered at once (the view may refresh only every few seconds).
            Some(_) => now >= self.next_frame || super::terminal::key_waiting(),
            None => self.fallback.due(now),
        }
    }

    fn needs(&self) -> Needs {
        match self.screen {
            Some(_) => Needs::EVERYTHING,
            None => self.fallback.needs(),
        }
    }

    /// Keys, then the frame: rendered in one piece, written to the terminal in pieces of
    /// their own (`LiveTerminal::draw`).
    fn show(
        &mut self,
        now: Nanos,
        model: &LiveModel,
        pacer: &mut Pacer,
        out: &mut dyn Write,
    ) -> Asked {
        let Some(term) = self.screen.as_mut() else {
            return self.fallback.show(now, model, pacer, out);
        };
        self.next_frame = next_due(now, self.refresh_ns);
        // The keys are read from the terminal: a few system calls, cold after a turn's sleep.
        pacer.between();
        let actions = match term.actions() {
            Ok(a) => a,
            Err(e) => {
                self.leave(out, &e);
                return Asked::default();
            }
        };
        let asked = self.keys(actions, model);
        pacer.between();
        // The model as the view is set (its sort, its help, paused): copied only when it is
        // not already so (a copy is tens of µs of strings, cold).
        let state = (self.sort, self.help, self.paused);
        let source = match &mut self.frozen {
            Some(frozen) => {
                (frozen.sort, frozen.help, frozen.paused) = state;
                &*frozen
            }
            None => model,
        };
        let shown = match (source.sort, source.help, source.paused) == state {
            true => std::borrow::Cow::Borrowed(source),
            false => {
                let mut m = source.clone();
                (m.sort, m.help, m.paused) = state;
                std::borrow::Cow::Owned(m)
            }
        };
        pacer.between();
        if let Some(Err(e)) = self.screen.as_mut().map(|t| t.draw(&shown, pacer)) {
            self.leave(out, &e);
        }
        asked
    }

    fn close(&mut self) {
        self.screen = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_ask_for_what_their_line_shows() {
        let run = PlainLines::new(0, 10);
        assert_eq!(run.needs(), Needs::PLAIN_LINE);
        assert!(!run.needs().feed && !run.needs().run_totals && !run.needs().bpf_cost);
        assert_eq!(run.needs().culprits, 1, "the top culprit");
        // A watch's line shows each thread's interruptions so far.
        assert!(PlainLines::watch(0, 10).needs().run_totals);
    }

    /// A line at each turn a second or more apart, a turn that comes a little early showing
    /// its line: turns of a second and of three, none skipped or doubled; turns closer than a
    /// second (a run deciding live) a line a second.
    #[test]
    fn plain_lines_come_once_a_turn_at_most_once_a_second() {
        let (s, ms) = (1_000_000_000i64, 1_000_000i64);
        let mut lines = PlainLines::new(0, 100 * s as Nanos);
        let (mut shown, mut out) = (0, Vec::new());
        let model = LiveModel::default();
        let mut pacer = Pacer::new(false);
        let mut show = |now: i64, lines: &mut PlainLines| {
            let due = lines.due(now as Nanos);
            if due {
                lines.show(now as Nanos, &model, &mut pacer, &mut out);
            }
            due
        };
        // Turns a second apart, then three, each a few ms early or late.
        let mut now = 0;
        for (gap, jitter) in [(1, -5), (1, 4), (1, -3), (3, 0), (3, -6), (1, 6), (3, 2)] {
            now += gap * s;
            assert!(show(now + jitter * ms, &mut lines), "turn at {now}");
            shown += 1;
        }
        // Turns 250 ms apart: every fourth.
        let quick: Vec<bool> = (1..=8)
            .map(|k| show(now + k * 250 * ms, &mut lines))
            .collect();
        assert_eq!(
            quick,
            [false, false, false, true, false, false, false, true]
        );
        shown += 2;
        assert_eq!(String::from_utf8_lossy(&out).lines().count(), shown);
        // Nothing after the end.
        assert!(!lines.due(100 * s as Nanos));
    }
}
