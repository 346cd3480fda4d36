//! jitterscope's side of the check: the measured time per culprit on one CPU, and the
//! recorded window, read from a run file. Read from the JSON itself rather than through
//! `report::runfile`'s types, so that one small function follows the schema's versions:
//! `jitterscope.run/1` (a culprit's `cpus: [{cpu, count}]`, where `count` holds ns of
//! measured and inferred time together) and `jitterscope.run/2` (`cpus: [{cpu, measured_ns,
//! inferred_ns, host_ns}]`: `measured_ns` is compared, inferred time has no kernel record;
//! `host_ns`, steal inside the cause's runs that jitterscope gave to `hypervisor`, is read
//! so that the runs' whole span, which perf sees, can be compared).
//! A run file of mode `watch` (`jitterscope watch`, schema 2) holds watched threads instead:
//! their wake-up delays are read by tid.

use serde_json::Value;

use crate::model::{Cpu, CulpritClass, Nanos};

/// One culprit row of the run file, as far as the check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeasuredRow {
    /// The class as written; `None` for a class this version does not know.
    pub class: Option<CulpritClass>,
    pub class_text: String,
    pub name: String,
    pub detail: String,
    /// Measured time on the CPU asked for.
    pub ns: Nanos,
    /// Steal inside its runs there, given to `hypervisor` (0 in schema 1).
    pub host_ns: Nanos,
    /// An own IPI's system vector (the run file's `vector`; absent in older files).
    pub vector: Option<String>,
}

/// What the check reads from a run file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    pub schema: String,
    pub label: String,
    /// The recorded window, CLOCK_MONOTONIC (the clock of `perf record -k mono`).
    pub record_from_ns: Nanos,
    pub duration_ns: Nanos,
    pub consumer_cpus: Vec<Cpu>,
    pub stall_threshold_ns: Nanos,
    pub rows: Vec<MeasuredRow>,
}

#[derive(Debug, thiserror::Error)]
pub enum MeasuredError {
    #[error("cannot read the run file: {0}")]
    Json(String),
    #[error("cannot compare run file schema {0:?}: the check reads jitterscope.run/1 and jitterscope.run/2")]
    Schema(String),
    #[error("the run file has no {0}; is it a complete jitterscope run file?")]
    Missing(&'static str),
    #[error("the run file's run.record_from_ns is 0: it was written by a jitterscope that did not record its window, so perf's events cannot be clipped to it")]
    NoWindow,
    #[error("the run file is of mode {0:?}, not \"watch\": only `jitterscope watch` records wake-up delays; give its run file to --wakeups, or drop --wakeups to check a run's attribution")]
    NotWatch(String),
    #[error("the run file is of mode \"watch\" and holds wake-up delays, not time per cause: give --wakeups TID with one of its threads (tid and name: {0})")]
    WatchNeedsWakeups(String),
    #[error("thread {tid} is not in the run file (its watched threads: {watched}); give one of them to --wakeups")]
    NoThread { tid: u32, watched: String },
}

/// A watched thread's wake-up delays as jitterscope measured them (or perf's, folded the
/// same way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WakeupTotals {
    pub count: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
}

/// What the wake-up check reads from a watch run file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedThread {
    pub schema: String,
    pub label: String,
    /// The recorded window, CLOCK_MONOTONIC.
    pub record_from_ns: Nanos,
    pub duration_ns: Nanos,
    /// The id as the user (and perf, run in the same namespace) sees it.
    pub tid: u32,
    pub pid: u32,
    pub name: String,
    pub wakeups: WakeupTotals,
}

/// Reads jitterscope's measured time per culprit row on `cpu` (rows with nothing on that
/// CPU are left out) and the recorded window. The one place that knows the schemas.
pub fn read_measured(text: &str, cpu: Cpu) -> Result<Measured, MeasuredError> {
    let v: Value = serde_json::from_str(text).map_err(|e| MeasuredError::Json(e.to_string()))?;
    let schema = v["schema"]
        .as_str()
        .ok_or(MeasuredError::Missing("schema"))?;
    let per_cpu_key = match schema {
        "jitterscope.run/1" => "count",
        "jitterscope.run/2" => "measured_ns",
        other => return Err(MeasuredError::Schema(other.to_string())),
    };
    let run = &v["run"];
    let u = |x: &Value, what: &'static str| x.as_u64().ok_or(MeasuredError::Missing(what));
    let record_from_ns = u(&run["record_from_ns"], "run.record_from_ns")?;
    if record_from_ns == 0 {
        return Err(MeasuredError::NoWindow);
    }
    let culprits = match (v["culprits"].as_array(), v["mode"].as_str()) {
        (Some(c), _) => c,
        (None, Some("watch")) => return Err(MeasuredError::WatchNeedsWakeups(thread_list(&v))),
        (None, _) => return Err(MeasuredError::Missing("culprits")),
    };
    let mut rows = Vec::new();
    for c in culprits {
        let on_cpu = || {
            c["cpus"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|x| x["cpu"].as_u64() == Some(u64::from(cpu)))
        };
        let ns: Nanos = on_cpu().filter_map(|x| x[per_cpu_key].as_u64()).sum();
        let host_ns: Nanos = on_cpu().filter_map(|x| x["host_ns"].as_u64()).sum();
        if ns == 0 && host_ns == 0 {
            continue;
        }
        let class_text = c["class"].as_str().unwrap_or_default().to_string();
        rows.push(MeasuredRow {
            class: serde_json::from_value(Value::String(class_text.clone())).ok(),
            class_text,
            name: c["name"].as_str().unwrap_or_default().to_string(),
            detail: c["detail"].as_str().unwrap_or_default().to_string(),
            ns,
            host_ns,
            vector: c["vector"].as_str().map(str::to_string),
        });
    }
    Ok(Measured {
        schema: schema.to_string(),
        label: run["label"].as_str().unwrap_or_default().to_string(),
        record_from_ns,
        duration_ns: u(&run["duration_ns"], "run.duration_ns")?,
        consumer_cpus: run["consumer_cpus"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_u64().and_then(|c| Cpu::try_from(c).ok()))
            .collect(),
        stall_threshold_ns: run["settings"]["stall_threshold_ns"]
            .as_u64()
            .unwrap_or_default(),
        rows,
    })
}

/// Reads watched thread `tid` (the id as the user sees it) of a watch run file, and the
/// recorded window.
pub fn read_watched_thread(text: &str, tid: u32) -> Result<WatchedThread, MeasuredError> {
    let v: Value = serde_json::from_str(text).map_err(|e| MeasuredError::Json(e.to_string()))?;
    let schema = v["schema"]
        .as_str()
        .ok_or(MeasuredError::Missing("schema"))?;
    if !matches!(schema, "jitterscope.run/1" | "jitterscope.run/2") {
        return Err(MeasuredError::Schema(schema.to_string()));
    }
    match v["mode"].as_str() {
        Some("watch") => {}
        // Before watch mode a run file had no mode: it is a run's.
        other => return Err(MeasuredError::NotWatch(other.unwrap_or("run").to_string())),
    }
    let run = &v["run"];
    let u = |x: &Value, what: &'static str| x.as_u64().ok_or(MeasuredError::Missing(what));
    let record_from_ns = u(&run["record_from_ns"], "run.record_from_ns")?;
    if record_from_ns == 0 {
        return Err(MeasuredError::NoWindow);
    }
    let threads = v["threads"]
        .as_array()
        .ok_or(MeasuredError::Missing("threads"))?;
    let t = threads
        .iter()
        .find(|t| t["tid"].as_u64() == Some(u64::from(tid)))
        .ok_or_else(|| MeasuredError::NoThread {
            tid,
            watched: thread_list(&v),
        })?;
    let w = &t["wakeups"];
    Ok(WatchedThread {
        schema: schema.to_string(),
        label: run["label"].as_str().unwrap_or_default().to_string(),
        record_from_ns,
        duration_ns: u(&run["duration_ns"], "run.duration_ns")?,
        tid,
        pid: t["pid"]
            .as_u64()
            .and_then(|p| p.try_into().ok())
            .unwrap_or(0),
        name: t["name"].as_str().unwrap_or_default().to_string(),
        wakeups: WakeupTotals {
            count: u(&w["count"], "threads[].wakeups.count")?,
            total_ns: u(&w["total_ns"], "threads[].wakeups.total_ns")?,
            max_ns: u(&w["max_ns"], "threads[].wakeups.max_ns")?,
        },
    })
}

/// The watched threads, `4121 sleeper, 4130 worker` (`none`).
fn thread_list(v: &Value) -> String {
    let list: Vec<String> = v["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let tid = t["tid"].as_u64().map_or("?".to_string(), |n| n.to_string());
            format!("{tid} {}", t["name"].as_str().unwrap_or_default())
                .trim_end()
                .to_string()
        })
        .collect();
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"{"schema": "jitterscope.run/1",
      "run": {"label": "q", "record_from_ns": 1000, "duration_ns": 500, "consumer_cpus": [1],
              "settings": {"stall_threshold_ns": 1000}},
      "culprits": [
        {"class": "timer_tick", "name": "local timer", "detail": "", "total_ns": 70,
         "cpus": [{"cpu": 0, "count": 30}, {"cpu": 1, "count": 40}]},
        {"class": "kthread", "name": "kdamond.0", "detail": "", "total_ns": 5,
         "cpus": [{"cpu": 0, "count": 5}]}
      ]}"#;

    const V2: &str = r#"{"schema": "jitterscope.run/2",
      "run": {"label": "q", "record_from_ns": 1000, "duration_ns": 500, "consumer_cpus": [1],
              "settings": {"stall_threshold_ns": 1000}},
      "culprits": [
        {"class": "timer_tick", "name": "local timer", "detail": "scheduler tick",
         "measured_ns": 40, "inferred_ns": 20,
         "cpus": [{"cpu": 1, "measured_ns": 40, "inferred_ns": 20}]},
        {"class": "timer_tick", "name": "local timer", "detail": "hrtimer_wakeup of sleep",
         "measured_ns": 3, "inferred_ns": 0,
         "cpus": [{"cpu": 1, "measured_ns": 3, "inferred_ns": 0}]},
        {"class": "brand_new", "name": "x", "detail": "",
         "cpus": [{"cpu": 1, "measured_ns": 0, "inferred_ns": 9}]},
        {"class": "kworker", "name": "kworker/1:1", "detail": "vmstat_update",
         "measured_ns": 7, "inferred_ns": 0, "host_ns": 5,
         "cpus": [{"cpu": 0, "measured_ns": 1, "inferred_ns": 0},
                  {"cpu": 1, "measured_ns": 6, "inferred_ns": 0, "host_ns": 5}]}
      ]}"#;

    #[test]
    fn schema_1_reads_the_per_cpu_count_as_measured() {
        let m = read_measured(V1, 1).unwrap();
        assert_eq!((m.record_from_ns, m.duration_ns), (1000, 500));
        assert_eq!(m.consumer_cpus, vec![1]);
        assert_eq!(m.rows.len(), 1);
        assert_eq!((m.rows[0].ns, m.rows[0].host_ns), (40, 0));
        assert_eq!(m.rows[0].class, Some(CulpritClass::TimerTick));
    }

    #[test]
    fn schema_2_reads_measured_ns_and_the_hosts_time_inside_runs() {
        let m = read_measured(V2, 1).unwrap();
        let ns: Vec<(u64, u64)> = m.rows.iter().map(|r| (r.ns, r.host_ns)).collect();
        assert_eq!(ns, vec![(40, 0), (3, 0), (6, 5)]);
        assert_eq!(m.rows[1].detail, "hrtimer_wakeup of sleep");
        // A run the host held whole is still a row.
        let whole = V2.replace(
            r#"{"cpu": 1, "measured_ns": 6, "inferred_ns": 0, "host_ns": 5}"#,
            r#"{"cpu": 1, "measured_ns": 0, "inferred_ns": 0, "host_ns": 5}"#,
        );
        let m = read_measured(&whole, 1).unwrap();
        assert_eq!((m.rows[2].ns, m.rows[2].host_ns), (0, 5));
    }

    const WATCH: &str = r#"{"schema": "jitterscope.run/2", "mode": "watch",
      "run": {"label": "w", "record_from_ns": 1000, "duration_ns": 500, "new_field": [1]},
      "threads": [
        {"tid": 4121, "kernel_tid": 90121, "pid": 4120, "name": "sleeper",
         "wakeups": {"count": 950, "total_ns": 12345678, "max_ns": 99999, "p99_ns": 5}},
        {"tid": 4130, "kernel_tid": 90130, "pid": 4120, "name": "worker",
         "wakeups": {"count": 0, "total_ns": 0, "max_ns": 0}}
      ]}"#;

    #[test]
    fn a_watched_thread_is_read_by_the_tid_the_user_sees() {
        let t = read_watched_thread(WATCH, 4121).unwrap();
        assert_eq!((t.record_from_ns, t.duration_ns), (1000, 500));
        assert_eq!((t.tid, t.pid, t.name.as_str()), (4121, 4120, "sleeper"));
        assert_eq!(
            t.wakeups,
            WakeupTotals {
                count: 950,
                total_ns: 12_345_678,
                max_ns: 99_999
            }
        );
        // The kernel's id is not the user's.
        let e = read_watched_thread(WATCH, 90121).unwrap_err();
        assert_eq!(
            e.to_string(),
            "thread 90121 is not in the run file (its watched threads: 4121 sleeper, 4130 worker); give one of them to --wakeups"
        );
    }

    #[test]
    fn wake_ups_are_asked_of_watch_run_files_only() {
        let e = read_watched_thread(V2, 4121).unwrap_err();
        assert!(
            matches!(&e, MeasuredError::NotWatch(m) if m == "run"),
            "{e}"
        );
        assert!(e.to_string().contains("mode \"run\", not \"watch\""), "{e}");
        let run = V2.replace(
            r#""schema": "jitterscope.run/2","#,
            r#""schema": "jitterscope.run/2", "mode": "run","#,
        );
        assert!(matches!(
            read_watched_thread(&run, 1),
            Err(MeasuredError::NotWatch(_))
        ));
        // And the per-cause check of a watch run file says to give --wakeups.
        let e = read_measured(WATCH, 1).unwrap_err();
        assert!(e.to_string().contains("give --wakeups TID"), "{e}");
        assert!(e.to_string().contains("4121 sleeper"), "{e}");
        let e = read_watched_thread(&WATCH.replace("run/2", "run/9"), 4121).unwrap_err();
        assert!(matches!(e, MeasuredError::Schema(_)));
    }

    #[test]
    fn other_schemas_and_missing_windows_are_refused() {
        let e = read_measured(&V1.replace("run/1", "run/9"), 1).unwrap_err();
        assert!(e.to_string().contains("jitterscope.run/9"), "{e}");
        let e = read_measured(
            &V1.replace("\"record_from_ns\": 1000", "\"record_from_ns\": 0"),
            1,
        )
        .unwrap_err();
        assert!(matches!(e, MeasuredError::NoWindow));
        assert!(read_measured("[", 1).is_err());
    }
}
