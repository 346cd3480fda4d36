//! A Chrome trace-event JSON of the worst stalls and the kernel records around them; opens
//! in the Perfetto UI (ui.perfetto.dev → Open trace file) and chrome://tracing. Each CPU gets
//! three tracks: the workload's stalls, the kernel's interruptions (nested episodes nest) and
//! the late messages (transit spikes) received there.

use std::borrow::Cow;

use serde::Serialize;

use super::runfile::RunFile;
use super::text::causes_line;

/// Each CPU's three tracks: stalls, kernel, late messages. In u64 so that no CPU number a
/// run file holds overflows it.
fn track_id(cpu: u32, track: u64) -> u64 {
    u64::from(cpu) * 3 + track
}

fn us(ns: u64, base: u64) -> f64 {
    ns.saturating_sub(base) as f64 / 1e3
}

/// One trace event. Serialized as it is made, straight into the output (a tree of
/// `serde_json::Value`s first cost a run's end some 9 ms, a third of it). Fields in
/// alphabetical order, as a `json!` object writes them.
#[derive(Serialize)]
struct Event<'a> {
    args: Args<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    name: Cow<'a, str>,
    ph: &'static str,
    pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Args<'a> {
    Name {
        name: String,
    },
    SortIndex {
        sort_index: u64,
    },
    Stall {
        causes: String,
        end_ns: u64,
        explained_share: Option<f64>,
        start_ns: u64,
    },
    Instant {
        class: &'a str,
    },
    Episode {
        class: &'a str,
        parent: Option<&'a str>,
        pid: u32,
    },
    Spike {
        consumer_stalled_ns: u64,
        producer_stalled_ns: u64,
        transit_ns: u64,
    },
}

impl<'a> Event<'a> {
    fn meta(tid: Option<u64>, name: &'a str, args: Args<'a>) -> Self {
        Event {
            args,
            dur: None,
            name: Cow::Borrowed(name),
            ph: "M",
            pid: 1,
            s: None,
            tid,
            ts: None,
        }
    }

    fn span(tid: u64, name: Cow<'a, str>, ts: f64, dur: f64, args: Args<'a>) -> Self {
        Event {
            args,
            dur: Some(dur),
            name,
            ph: "X",
            pid: 1,
            s: None,
            tid: Some(tid),
            ts: Some(ts),
        }
    }
}

/// The trace's events, one after another into `out` (comma-separated).
struct Events {
    out: Vec<u8>,
    first: bool,
}

impl Events {
    fn push(&mut self, e: &Event) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        // Writing into a Vec cannot fail, and every field serializes (f64s are finite or
        // written as null).
        let _ = serde_json::to_writer(&mut self.out, e);
    }
}

pub fn render(run: &RunFile) -> String {
    let base = run.run.record_from_ns;
    let mut cpus: Vec<u32> = run.stalls.iter().map(|s| s.cpu).collect();
    cpus.extend(run.spikes.iter().map(|s| s.consumer_cpu));
    cpus.extend(
        run.stalls
            .iter()
            .flat_map(|s| s.timeline.iter().map(|i| i.cpu)),
    );
    cpus.sort_unstable();
    cpus.dedup();
    let mut ev = Events {
        out: Vec::with_capacity(64 * 1024),
        first: true,
    };
    ev.out
        .extend_from_slice(b"{\"displayTimeUnit\":\"ns\",\"otherData\":");
    let other = serde_json::json!({"jitterscope_schema": run.schema, "label": run.run.label});
    let _ = serde_json::to_writer(&mut ev.out, &other);
    ev.out.extend_from_slice(b",\"traceEvents\":[");
    let process = format!("jitterscope '{}'", run.run.label);
    ev.push(&Event::meta(
        None,
        "process_name",
        Args::Name { name: process },
    ));
    for &cpu in &cpus {
        for (tid, what) in [
            (track_id(cpu, 0), "workload stalls"),
            (track_id(cpu, 1), "kernel"),
            (track_id(cpu, 2), "late messages"),
        ] {
            let name = format!("CPU {cpu} {what}");
            ev.push(&Event::meta(Some(tid), "thread_name", Args::Name { name }));
            ev.push(&Event::meta(
                Some(tid),
                "thread_sort_index",
                Args::SortIndex { sort_index: tid },
            ));
        }
    }
    // The same kernel record can sit in the timelines of several stalls: emit it once.
    let mut seen = std::collections::HashSet::new();
    for s in &run.stalls {
        ev.push(&Event::span(
            track_id(s.cpu, 0),
            Cow::Owned(format!("{} stalled", s.thread)),
            us(s.start_ns, base),
            s.duration_ns as f64 / 1e3,
            Args::Stall {
                causes: causes_line(s),
                end_ns: s.end_ns,
                explained_share: s.explained_share,
                start_ns: s.start_ns,
            },
        ));
        for i in &s.timeline {
            if !seen.insert((i.cpu, i.start_ns, i.end_ns, i.class, i.id)) {
                continue;
            }
            let name = if i.detail.is_empty() {
                Cow::Borrowed(&*i.name)
            } else {
                Cow::Owned(format!("{} {}", i.name, i.detail))
            };
            let (tid, ts) = (track_id(i.cpu, 1), us(i.start_ns, base));
            if i.end_ns == i.start_ns {
                ev.push(&Event {
                    args: Args::Instant {
                        class: i.class.as_str(),
                    },
                    dur: None,
                    name,
                    ph: "i",
                    pid: 1,
                    s: Some("t"),
                    tid: Some(tid),
                    ts: Some(ts),
                });
            } else {
                let args = Args::Episode {
                    class: i.class.as_str(),
                    parent: i.parent.map(|p| p.as_str()),
                    pid: i.pid,
                };
                ev.push(&Event::span(
                    tid,
                    name,
                    ts,
                    i.duration_ns() as f64 / 1e3,
                    args,
                ));
            }
        }
    }
    for sp in &run.spikes {
        ev.push(&Event::span(
            track_id(sp.consumer_cpu, 2),
            Cow::Owned(format!("{} message late", sp.consumer)),
            us(sp.publish_ns, base),
            sp.transit_ns as f64 / 1e3,
            Args::Spike {
                consumer_stalled_ns: sp.consumer_stalled_ns,
                producer_stalled_ns: sp.producer_stalled_ns,
                transit_ns: sp.transit_ns,
            },
        ));
    }
    ev.out.extend_from_slice(b"]}");
    // Only UTF-8 went in: serde_json writes valid UTF-8 and the rest is ASCII.
    String::from_utf8(ev.out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn cpu_numbers_past_a_third_of_u32_keep_their_own_tracks() {
        // 1431655766 × 3 wraps to 2 in u32: the stall would land on CPU 0's spike track.
        let mut run = crate::report::runfile::tests::sample();
        run.stalls[0].cpu = 1_431_655_766;
        let trace: Value = serde_json::from_str(&render(&run)).unwrap();
        let stall = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "X")
            .unwrap();
        assert_eq!(stall["tid"], 4_294_967_298u64);
    }
}
