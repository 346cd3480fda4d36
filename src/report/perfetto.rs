//! A Chrome trace-event JSON of the worst stalls and the kernel records around them; opens
//! in the Perfetto UI (ui.perfetto.dev → Open trace file) and chrome://tracing. Each CPU gets
//! three tracks: the workload's stalls, the kernel's interruptions (nested episodes nest) and
//! the late messages (transit spikes) received there.

use serde_json::{json, Value};

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

pub fn render(run: &RunFile) -> String {
    let base = run.run.record_from_ns;
    let mut events: Vec<Value> = Vec::new();
    let mut cpus: Vec<u32> = run.stalls.iter().map(|s| s.cpu).collect();
    cpus.extend(run.spikes.iter().map(|s| s.consumer_cpu));
    cpus.extend(
        run.stalls
            .iter()
            .flat_map(|s| s.timeline.iter().map(|i| i.cpu)),
    );
    cpus.sort_unstable();
    cpus.dedup();
    events.push(json!({"ph": "M", "pid": 1, "name": "process_name",
        "args": {"name": format!("jitterscope '{}'", run.run.label)}}));
    for &cpu in &cpus {
        for (tid, what) in [
            (track_id(cpu, 0), "workload stalls"),
            (track_id(cpu, 1), "kernel"),
            (track_id(cpu, 2), "late messages"),
        ] {
            events.push(
                json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
                "args": {"name": format!("CPU {cpu} {what}")}}),
            );
            events.push(
                json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index",
                "args": {"sort_index": tid}}),
            );
        }
    }
    // The same kernel record can sit in the timelines of several stalls: emit it once.
    let mut seen = std::collections::HashSet::new();
    for s in &run.stalls {
        events.push(json!({
            "ph": "X", "pid": 1, "tid": track_id(s.cpu, 0),
            "name": format!("{} stalled", s.thread),
            "ts": us(s.start_ns, base), "dur": s.duration_ns as f64 / 1e3,
            "args": {"causes": causes_line(s), "explained_share": s.explained_share,
                     "start_ns": s.start_ns, "end_ns": s.end_ns},
        }));
        for i in &s.timeline {
            if !seen.insert((i.cpu, i.start_ns, i.end_ns, i.class, i.id)) {
                continue;
            }
            let name = if i.detail.is_empty() {
                i.name.to_string()
            } else {
                format!("{} {}", i.name, i.detail)
            };
            if i.end_ns == i.start_ns {
                events.push(
                    json!({"ph": "i", "s": "t", "pid": 1, "tid": track_id(i.cpu, 1),
                    "name": name, "ts": us(i.start_ns, base),
                    "args": {"class": i.class.as_str()}}),
                );
            } else {
                events.push(json!({"ph": "X", "pid": 1, "tid": track_id(i.cpu, 1),
                    "name": name, "ts": us(i.start_ns, base),
                    "dur": i.duration_ns() as f64 / 1e3,
                    "args": {"class": i.class.as_str(), "pid": i.pid,
                             "parent": i.parent.map(|p| p.as_str())}}));
            }
        }
    }
    for sp in &run.spikes {
        events.push(json!({
            "ph": "X", "pid": 1, "tid": track_id(sp.consumer_cpu, 2),
            "name": format!("{} message late", sp.consumer),
            "ts": us(sp.publish_ns, base), "dur": sp.transit_ns as f64 / 1e3,
            "args": {"transit_ns": sp.transit_ns, "producer_stalled_ns": sp.producer_stalled_ns,
                     "consumer_stalled_ns": sp.consumer_stalled_ns},
        }));
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"jitterscope_schema": run.schema, "label": run.run.label}})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
