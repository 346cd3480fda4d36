//! Record: the one loop from the source's release to its end, for every kind of session —
//! take the source's turn, rewrite the metrics file when due, show the running model to a
//! `Frontend` — ending with why it ended. What a turn does is the source's (`StallSource`).

use std::io::Write;

use anyhow::Result;

use super::source::StallSource;
use super::Console;
use crate::live::frontend::Frontend;
use crate::model::Ended;
use crate::platform::clock::monotonic_ns;
use crate::report::metrics::MetricsFile;

/// Why a session ended (the run file's `ended`, and `end_reason` in words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    Completed,
    /// A signal or the live view ended it early.
    Interrupted(String),
    /// A workload thread was moved off its CPU (offlined, cpuset changed).
    CpuLost(String),
    /// A watch's target is gone: the command it started, or every watched thread, exited.
    TargetExited(String),
}

impl EndReason {
    /// The run file's `ended`.
    pub fn ended(&self) -> Ended {
        match self {
            EndReason::Completed => Ended::Completed,
            EndReason::Interrupted(_) => Ended::Interrupted,
            EndReason::CpuLost(_) => Ended::CpuLost,
            EndReason::TargetExited(_) => Ended::TargetExited,
        }
    }

    /// Why, in words (empty when it completed).
    pub fn reason(&self) -> &str {
        match self {
            EndReason::Completed => "",
            EndReason::Interrupted(why)
            | EndReason::CpuLost(why)
            | EndReason::TargetExited(why) => why,
        }
    }
}

/// Drives `source` turn by turn until it ends, the session is stopped, or the live view quits.
pub(super) fn record<S: StallSource>(
    source: &mut S,
    frontend: &mut dyn Frontend,
    out: &mut Console,
) -> Result<EndReason> {
    let tui = source.tui();
    let ended = loop {
        if let Some(end) = source.wait_turn() {
            break end;
        }
        source.turn();
        let now = monotonic_ns();
        if source.metrics().is_some_and(|m| m.due(now)) {
            source.charged(|s| {
                if let Err(why) = s.rewrite_metrics(now) {
                    note_metrics_failure(s.metrics(), &why, tui, out);
                }
            });
        }
        if let Some((end, message)) = source.end_asked(now) {
            frontend.close();
            if !message.is_empty() {
                writeln!(out, "{message}")?;
            }
            source.request_stop();
            break end;
        }
        if !frontend.due(now) {
            continue;
        }
        // The live view may have fallen back to plain lines: what it needs is asked each time.
        let asked = source.charged(|s| {
            let needs = frontend.needs();
            let (model, pacer) = s.live(now, needs);
            frontend.show(now, model, pacer, out)
        });
        if asked.reset {
            source.reset_view();
        }
        if asked.quit {
            frontend.close();
            let end = EndReason::Interrupted("stopped from the live view".into());
            let verb = source.words().verb;
            writeln!(out, "stopped from the live view, writing what was {verb}")?;
            source.request_stop();
            break end;
        }
    };
    source.turns_over();
    // Leave the alternate screen before the report is printed.
    frontend.close();
    Ok(ended)
}

/// A failed rewrite of the metrics file, said once (not over the live view: the end of the
/// run says it); later rewrites are tried on time.
fn note_metrics_failure(file: Option<&MetricsFile>, why: &str, tui: bool, out: &mut Console) {
    if file.is_some_and(|m| m.failures == 1) && !tui {
        let _ = writeln!(
            out,
            "WARNING: the metrics file was not rewritten: {why}; trying again every interval"
        );
    }
}
