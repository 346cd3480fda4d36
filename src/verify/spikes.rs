//! The culprits of each kept spike against perf's events in the same windows. A spike's
//! culprits are what ran in two windows: on the producer's CPU from the publication to the end
//! of the producer stall it was published in (`producer_stalled_ns`), and on the consumer's
//! CPU over its stalls from then to the receipt (`consumer_stalled_ns` of them). perf's net
//! durations over those windows (on the consumer's side, what ran there other than the
//! workload's threads) are joined with the culprits' measured time by name, as the per-cause
//! check joins them (`compare::compare`), and graded the same way: per cause within the
//! tolerance widened by the handlers' allowance, the agreement `1 − Σ|js − perf| / 2 Σ perf`
//! summed over every spike's windows. Inferred time has no perf counterpart and is not
//! compared.

use std::fmt::Write as _;

use serde_json::Value;

use super::compare::{compare, Comparison, Grade, Row, Tolerances};
use super::measured::{Measured, MeasuredError, MeasuredRow};
use super::perf::{CpuTime, Event};
use crate::model::{Cpu, Nanos};
use crate::units::fmt_ns;

/// Spike sides the table lists: every one whose first culprit is not perf's, and the least
/// agreeing up to this many.
const SHOWN: usize = 12;

/// One side of a kept spike, as the run file has it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpikeSide {
    pub cpu: Cpu,
    /// The window its culprits were taken from: on the producer's side the held publication,
    /// on the consumer's the span from the message being visible to its receipt (only its
    /// stalls count, which perf's side finds as what ran other than the workload).
    pub from_ns: Nanos,
    pub to_ns: Nanos,
    /// Time away from the workload in the window, as jitterscope measured it.
    pub stalled_ns: Nanos,
    pub culprits: Vec<MeasuredRow>,
}

/// A kept spike: its message's transit and its two sides.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptSpike {
    pub publish_ns: Nanos,
    pub transit_ns: Nanos,
    pub producer: SpikeSide,
    pub consumer: SpikeSide,
}

/// One side of one spike, compared.
#[derive(Debug, Clone)]
pub struct SideCheck {
    pub publish_ns: Nanos,
    pub transit_ns: Nanos,
    pub side: &'static str,
    pub cpu: Cpu,
    pub comparison: Comparison,
}

impl SideCheck {
    /// jitterscope's largest culprit perf can see, and perf's largest cause (names). A task
    /// whose switches perf lost in the window (graded uncertain) is left out of both: perf
    /// cannot tell its time.
    pub fn firsts(&self) -> (Option<&Row>, Option<&Row>) {
        let rows = || self.comparison.rows.iter().filter(|r| r.perf_measured());
        (
            rows().filter(|r| r.js_ns > 0).max_by_key(|r| r.js_ns),
            rows().filter(|r| r.perf_ns > 0).max_by_key(|r| r.perf_ns),
        )
    }

    /// Some row of its comparison is `pred`.
    fn any_row(&self, pred: impl Fn(&Row) -> bool) -> bool {
        self.comparison.rows.iter().any(pred)
    }

    /// Both name the same first culprit (or neither saw any).
    pub fn same_first(&self) -> bool {
        match self.firsts() {
            (Some(j), Some(p)) => j.name == p.name,
            (None, None) => true,
            _ => false,
        }
    }
}

/// Every kept spike's two sides against perf.
#[derive(Debug, Clone)]
pub struct SpikeCheck {
    pub sides: Vec<SideCheck>,
    /// Spikes of the run file outside perf's recording on either CPU: not compared.
    pub not_covered: usize,
    /// Σ over every side of every spike of the differences beyond the handlers, and of perf's
    /// time: the agreement is `1 − diff / 2 total`.
    pub diff_ns: Nanos,
    pub perf_ns: Nanos,
    pub least_agreement: f64,
    pub least_same_first: f64,
}

/// The kept spikes of consumer CPU `cpu` in a run file (none in a watch, or in files
/// written before spikes kept their culprits).
pub fn read_spikes(text: &str, cpu: Cpu) -> Result<Vec<KeptSpike>, MeasuredError> {
    let v: Value = serde_json::from_str(text).map_err(|e| MeasuredError::Json(e.to_string()))?;
    let per_cpu_key = match v["schema"].as_str() {
        Some("jitterscope.run/2") => "measured_ns",
        // Schema 1 held measured and inferred time together: no measured part to compare.
        _ => return Ok(Vec::new()),
    };
    let n = |x: &Value, k: &str| x[k].as_u64().unwrap_or_default();
    let culprits = |list: &Value| -> Vec<MeasuredRow> {
        list.as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let class_text = c["class"].as_str().unwrap_or_default().to_string();
                MeasuredRow {
                    class: serde_json::from_value(Value::String(class_text.clone())).ok(),
                    class_text,
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    detail: c["detail"].as_str().unwrap_or_default().to_string(),
                    ns: n(c, per_cpu_key),
                    host_ns: n(c, "host_ns"),
                    vector: None,
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for s in v["spikes"].as_array().into_iter().flatten() {
        if n(s, "consumer_cpu") != u64::from(cpu) {
            continue;
        }
        let (publish, receive) = (n(s, "publish_ns"), n(s, "receive_ns"));
        let held = n(s, "producer_stalled_ns");
        let visible = (publish + held).min(receive.max(publish));
        let cpu_of = |k: &str| Cpu::try_from(n(s, k)).unwrap_or_default();
        out.push(KeptSpike {
            publish_ns: publish,
            transit_ns: n(s, "transit_ns"),
            producer: SpikeSide {
                cpu: cpu_of("producer_cpu"),
                from_ns: publish,
                to_ns: visible,
                stalled_ns: held,
                culprits: culprits(&s["producer_culprits"]),
            },
            consumer: SpikeSide {
                cpu,
                from_ns: visible,
                to_ns: receive.max(visible),
                stalled_ns: n(s, "consumer_stalled_ns"),
                culprits: culprits(&s["consumer_culprits"]),
            },
        });
    }
    Ok(out)
}

/// The spikes of `js` (the run file's measured view, for its names and window) against
/// perf's `events`, graded by `tol` (its floor is not applied: a spike's causes are µs).
pub fn check_spikes(
    spikes: &[KeptSpike],
    js: &Measured,
    events: &[Event],
    tol: &Tolerances,
) -> SpikeCheck {
    let tol = Tolerances {
        floor_ns: 0,
        ..tol.clone()
    };
    let mut cpus: Vec<(Cpu, CpuTime)> = Vec::new();
    let mut check = SpikeCheck {
        sides: Vec::new(),
        not_covered: 0,
        diff_ns: 0,
        perf_ns: 0,
        least_agreement: tol.spike_agreement,
        least_same_first: tol.spike_same_first,
    };
    for spike in spikes {
        let mut sides = Vec::new();
        for (name, side) in [("producer", &spike.producer), ("consumer", &spike.consumer)] {
            if side.to_ns <= side.from_ns {
                continue;
            }
            if !cpus.iter().any(|(c, _)| *c == side.cpu) {
                cpus.push((side.cpu, CpuTime::of(events, side.cpu)));
            }
            let Some((_, time)) = cpus.iter().find(|(c, _)| *c == side.cpu) else {
                continue;
            };
            let perf = time.in_windows(&[(side.from_ns, side.to_ns)]);
            let mine = Measured {
                schema: js.schema.clone(),
                label: js.label.clone(),
                record_from_ns: side.from_ns,
                duration_ns: side.to_ns - side.from_ns,
                consumer_cpus: js.consumer_cpus.clone(),
                stall_threshold_ns: js.stall_threshold_ns,
                rows: side.culprits.clone(),
            };
            let comparison = compare(&mine, &perf, &tol);
            sides.push(SideCheck {
                publish_ns: spike.publish_ns,
                transit_ns: spike.transit_ns,
                side: name,
                cpu: side.cpu,
                comparison,
            });
        }
        if sides.iter().any(|s| !s.comparison.covered) {
            check.not_covered += 1;
            continue;
        }
        for s in &sides {
            for r in s.comparison.rows.iter().filter(|r| r.perf_measured()) {
                check.diff_ns += r.beyond_handlers();
                check.perf_ns += r.perf_ns;
            }
        }
        check.sides.extend(sides);
    }
    check
}

impl SpikeCheck {
    pub fn agreement(&self) -> f64 {
        match (self.diff_ns, self.perf_ns) {
            (0, _) => 1.0,
            (_, 0) => 0.0,
            (d, t) => 1.0 - d as f64 / (2.0 * t as f64),
        }
    }

    /// The share of compared sides whose first culprit is perf's first.
    pub fn same_first_share(&self) -> f64 {
        // The sides `firsts` can judge: time in a row perf measured whole.
        let with_time: Vec<&SideCheck> = self
            .sides
            .iter()
            .filter(|s| s.any_row(|r| r.perf_measured() && (r.perf_ns > 0 || r.js_ns > 0)))
            .collect();
        if with_time.is_empty() {
            return 1.0;
        }
        with_time.iter().filter(|s| s.same_first()).count() as f64 / with_time.len() as f64
    }

    /// Why the spikes' check fails; empty when it passes. A run with spikes none of which
    /// could be compared fails: the check compared nothing.
    pub fn failures(&self, spikes: usize) -> Vec<String> {
        let mut f = Vec::new();
        if spikes > 0 && self.sides.is_empty() {
            f.push(format!(
                "none of the {spikes} kept spikes could be compared: perf did not record both CPUs over their windows"
            ));
            return f;
        }
        let a = self.agreement();
        if a < self.least_agreement {
            f.push(format!(
                "the spikes' culprits agree with perf's events in their windows at {a:.3}, under {:.2}",
                self.least_agreement
            ));
        }
        let same = self.same_first_share();
        if same < self.least_same_first {
            f.push(format!(
                "the first culprit of {:.0} % of the spikes' sides is perf's first in the window, under {:.0} %",
                same * 100.0,
                self.least_same_first * 100.0
            ));
        }
        f
    }

    /// A Markdown section: a line per spike side, then the agreement and the verdict.
    pub fn to_markdown(&self, spikes: usize) -> String {
        let lost = self
            .sides
            .iter()
            .filter(|s| s.any_row(|r| r.grade == Grade::Uncertain))
            .count();
        let mut s = format!(
            "#### kept spikes: their culprits against perf's events in their windows\n\n{} of {spikes} kept spikes compared ({} outside perf's recording); on {lost} sides perf lost a task's switches, whose time is not compared\n\n",
            self.sides
                .iter()
                .map(|s| s.publish_ns)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            self.not_covered
        );
        if !self.sides.is_empty() {
            s.push_str("| published (ns) | transit | side | CPU | window | jitterscope's first (measured) | perf's first | agreement |\n|---:|---:|---|---:|---:|---|---|---:|\n");
        }
        // The sides whose first culprit differs, then the least agreeing, up to SHOWN lines.
        let mut shown: Vec<&SideCheck> = self.sides.iter().collect();
        shown.sort_by(|a, b| {
            (a.same_first(), a.comparison.agreement)
                .partial_cmp(&(b.same_first(), b.comparison.agreement))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let differing = shown.iter().filter(|s| !s.same_first()).count();
        shown.truncate(SHOWN.max(differing));
        for side in &shown {
            let c = &side.comparison;
            let (j, p) = side.firsts();
            let show = |r: Option<&Row>, ns: fn(&Row) -> Nanos| {
                r.map_or("–".to_string(), |r| {
                    format!("{} {}", r.name.replace('|', "\\|"), fmt_ns(ns(r)))
                })
            };
            let mark = if side.same_first() { "" } else { " ✗" };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {}{mark} | {:.3} |",
                side.publish_ns,
                fmt_ns(side.transit_ns),
                side.side,
                side.cpu,
                fmt_ns(c.duration_ns),
                show(j, |r| r.js_ns),
                show(p, |r| r.perf_ns),
                c.agreement
            );
        }
        if self.sides.len() > shown.len() {
            let _ = writeln!(
                s,
                "| … {} more sides, each naming perf's first culprit and agreeing at least as well | | | | | | | |",
                self.sides.len() - shown.len()
            );
        }
        let failures = self.failures(spikes);
        let _ = writeln!(
            s,
            "\n- agreement over every compared window: {:.3} (at least {:.2}); the first culprit the same as perf's on {:.0} % of the sides (at least {:.0} %)",
            self.agreement(),
            self.least_agreement,
            self.same_first_share() * 100.0,
            self.least_same_first * 100.0
        );
        match failures.is_empty() {
            true => s.push_str("\n**spikes: PASS**\n"),
            false => {
                let _ = writeln!(s, "\n**spikes: FAIL** — {}", failures.join("; "));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::perf;

    /// perf's events: on CPU 1 the consumer, then `kworker/1:2` for 40 µs from 100.000100,
    /// then the consumer; on CPU 0 the producer throughout.
    const PERF: &str = "\
[000]   100.000000000:                     sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=js-producer next_pid=9 next_prio=120
[001]   100.000000000:                     sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=js-consumer-1 next_pid=10 next_prio=120
[001]   100.000100000:                     sched:sched_switch: prev_comm=js-consumer-1 prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=kworker/1:2 next_pid=30 next_prio=120
[001]   100.000140000:                     sched:sched_switch: prev_comm=kworker/1:2 prev_pid=30 prev_prio=120 prev_state=I ==> next_comm=js-consumer-1 next_pid=10 next_prio=120
[000]   100.001000000:                     sched:sched_switch: prev_comm=js-producer prev_pid=9 prev_prio=120 prev_state=R ==> next_comm=swapper/0 next_pid=0 next_prio=120
[001]   100.001000000:                     sched:sched_switch: prev_comm=js-consumer-1 prev_pid=10 prev_prio=120 prev_state=R ==> next_comm=swapper/1 next_pid=0 next_prio=120
";

    /// A run file with one spike published at 100.000090 and received at 100.000150, its
    /// consumer's culprit `name` with `ns` measured.
    fn run_file(name: &str, ns: Nanos) -> String {
        serde_json::json!({
            "schema": "jitterscope.run/2",
            "spikes": [{
                "consumer": "accumulator", "producer_cpu": 0, "consumer_cpu": 1,
                "publish_ns": 100_000_090_000u64, "receive_ns": 100_000_150_000u64,
                "transit_ns": 60_000, "producer_stalled_ns": 0, "consumer_stalled_ns": 40_000,
                "producer_culprits": [],
                "consumer_culprits": [{"class": "kworker", "name": name, "detail": "vmstat_update",
                    "measured_ns": ns, "inferred_ns": 0, "episodes": 1, "share": 0.6}]
            }]
        })
        .to_string()
    }

    fn checked(name: &str, ns: Nanos) -> SpikeCheck {
        let kept = read_spikes(&run_file(name, ns), 1).unwrap();
        assert_eq!(kept.len(), 1);
        let js = Measured {
            schema: "jitterscope.run/2".into(),
            label: "t".into(),
            record_from_ns: 99_000_000_000,
            duration_ns: 2_000_000_000,
            consumer_cpus: vec![1],
            stall_threshold_ns: 1_000,
            rows: Vec::new(),
        };
        let events = perf::parse(PERF).unwrap();
        let tol = Tolerances {
            coverage_slack_ns: 0,
            ..Tolerances::default()
        };
        check_spikes(&kept, &js, &events, &tol)
    }

    #[test]
    fn a_spikes_culprits_are_held_against_perf_in_its_window() {
        let c = checked("kworker/1:2", 40_000);
        assert_eq!(c.sides.len(), 1, "the producer's side held nothing");
        assert_eq!((c.diff_ns, c.perf_ns), (0, 40_000));
        assert!(c.sides[0].same_first());
        assert!(c.failures(1).is_empty(), "{:?}", c.failures(1));
        // Another culprit than what ran in the window: perf's first is not jitterscope's,
        // and the window's time is all difference.
        let wrong = checked("kworker/1:0", 40_000);
        assert!(!wrong.sides[0].same_first());
        assert_eq!(wrong.agreement(), 0.0);
        let f = wrong.failures(1);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(wrong.to_markdown(1).contains("**spikes: FAIL**"));
        // Half the time: beyond what the tolerance allows.
        assert!(checked("kworker/1:2", 20_000).agreement() < 0.95);
    }

    #[test]
    fn kept_spikes_none_of_which_were_compared_fail() {
        let none = SpikeCheck {
            sides: Vec::new(),
            not_covered: 3,
            diff_ns: 0,
            perf_ns: 0,
            least_agreement: 0.95,
            least_same_first: 0.9,
        };
        assert_eq!(none.failures(3).len(), 1);
        assert!(none.failures(0).is_empty());
    }
}
