//! The kernel's own per-CPU counters, sampled before and after an observation: the time
//! tasks ran, idle entries and time per cpuidle state, interrupts per IRQ (device IRQs and
//! the x86 system vectors: LOC, RES, CAL, TLB…), softirqs per vector and the steal time.
//! `check` sets their growth beside what the probes saw: the kernel's count of the same
//! things, from files that need no tracing at all.
//!
//! Each source is parsed from its file's text by a function of its own (tested with text from
//! a real machine); a file that is absent leaves its part empty (`None`, or no rows), never
//! zero. Files are read through a `Root` (`/` live, a directory of files in tests) and at most
//! `READ_LIMIT` bytes of each.

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

use super::config::Root;
use crate::model::{Cpu, Nanos};

/// The most read of one file: /proc/interrupts on a machine with 1024 CPUs and some hundreds
/// of IRQs is a few MiB (11 characters a count).
pub const READ_LIMIT: u64 = 16 << 20;

/// An interrupt line of `/proc/interrupts`: a numbered IRQ, or one of the architecture's named
/// rows (`LOC`, `RES`, `CAL`, `TLB`, `NMI`…).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IrqLine {
    Numbered(u32),
    System(String),
}

/// One row of `/proc/interrupts` for the CPUs sampled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptRow {
    pub line: IrqLine,
    /// A numbered IRQ's actions (`virtio1-req.0`; empty when none), a system row's
    /// description (`Local timer interrupts`).
    pub name: String,
    /// Interrupts delivered to each sampled CPU.
    pub counts: BTreeMap<Cpu, u64>,
}

/// A cpuidle state of one CPU (`/sys/devices/system/cpu/cpuN/cpuidle/stateK`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// `stateK`'s K.
    pub index: u32,
    /// `name` (`POLL`, `C1`, `C1E`…).
    pub name: String,
    /// `usage`: times the CPU entered it.
    pub entries: u64,
    /// `time`, in ns (the file counts µs).
    pub time_ns: u64,
}

/// What the kernel had counted on one CPU at a moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSample {
    pub cpu: Cpu,
    /// `/proc/schedstat`'s `rq_cpu_time`: ns tasks ran there (None without CONFIG_SCHEDSTATS).
    pub task_run_ns: Option<u64>,
    /// `/proc/stat`'s user + nice + system time, in ns (counted in USER_HZ ticks: a CPU is
    /// charged a whole tick for what it ran when the tick came).
    pub busy_ns: Option<u64>,
    /// `/proc/stat`'s steal time, in ns: the host kept this vCPU off a physical CPU.
    pub steal_ns: Option<u64>,
    /// cpuidle states, empty when the CPU has no cpuidle driver.
    pub idle_states: Vec<IdleState>,
    /// `/proc/softirqs`: raised-and-run counts by vector name (`TIMER`, `RCU`, `SCHED`…).
    pub softirqs: BTreeMap<String, u64>,
}

/// The counters of some CPUs at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    /// When they were read (CLOCK_MONOTONIC).
    pub at_ns: Nanos,
    pub cpus: Vec<CpuSample>,
    /// `/proc/interrupts`, the columns of the sampled CPUs.
    pub interrupts: Vec<InterruptRow>,
}

/// Where a delta's task run time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunTimeSource {
    /// `/proc/schedstat` (exact, ns).
    Schedstat,
    /// `/proc/stat` user + nice + system (whole ticks).
    ProcStat,
}

/// An interrupt line's growth on one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptDelta {
    pub line: IrqLine,
    pub name: String,
    pub count: u64,
}

/// A cpuidle state's growth on one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleDelta {
    pub name: String,
    pub entries: u64,
    pub time_ns: u64,
}

/// What grew on one CPU between two samples; rows that did not grow are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuDelta {
    pub cpu: Cpu,
    /// ns tasks ran (None when neither source was read both times).
    pub task_run_ns: Option<u64>,
    pub task_run_source: Option<RunTimeSource>,
    pub steal_ns: Option<u64>,
    pub idle: Vec<IdleDelta>,
    pub interrupts: Vec<InterruptDelta>,
    pub softirqs: Vec<(String, u64)>,
}

/// The growth of the counters over an observation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterDelta {
    pub span_ns: Nanos,
    pub cpus: Vec<CpuDelta>,
}

impl CpuCounters {
    /// The counters of `cpus` on this machine now.
    pub fn sample(cpus: &[Cpu]) -> CpuCounters {
        CpuCounters::sample_in(&Root::live(), cpus)
    }

    /// The counters of `cpus` read under `root`.
    pub fn sample_in(root: &Root, cpus: &[Cpu]) -> CpuCounters {
        let at_ns = crate::platform::clock::monotonic_ns();
        let read = |abs: &str| read_bounded(root, abs);
        let schedstat = read("/proc/schedstat").map(|t| parse_schedstat(&t));
        let stat = read("/proc/stat").map(|t| parse_stat(&t, user_hz()));
        let softirqs = read("/proc/softirqs").map(|t| parse_softirqs(&t));
        let interrupts = read("/proc/interrupts")
            .map(|t| parse_interrupts(&t, cpus))
            .unwrap_or_default();
        let samples = cpus
            .iter()
            .map(|&cpu| {
                let stat = stat.as_ref().and_then(|s| s.get(&cpu));
                CpuSample {
                    cpu,
                    task_run_ns: schedstat.as_ref().and_then(|s| s.get(&cpu).copied()),
                    busy_ns: stat.map(|s| s.busy_ns),
                    steal_ns: stat.map(|s| s.steal_ns),
                    idle_states: idle_states(root, cpu),
                    softirqs: softirqs
                        .as_ref()
                        .map(|s| column(s, cpu))
                        .unwrap_or_default(),
                }
            })
            .collect();
        CpuCounters {
            at_ns,
            cpus: samples,
            interrupts,
        }
    }

    /// What grew from `earlier` to this sample, for the CPUs both hold. A counter that went
    /// back (a CPU unplugged and back) counts as no growth.
    pub fn since(&self, earlier: &CpuCounters) -> CounterDelta {
        let cpus = self
            .cpus
            .iter()
            .filter_map(|now| {
                let then = earlier.cpus.iter().find(|c| c.cpu == now.cpu)?;
                Some(cpu_delta(now, then, &self.interrupts, &earlier.interrupts))
            })
            .collect();
        CounterDelta {
            span_ns: self.at_ns.saturating_sub(earlier.at_ns),
            cpus,
        }
    }
}

impl CounterDelta {
    /// One CPU's growth.
    pub fn cpu(&self, cpu: Cpu) -> Option<&CpuDelta> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }
}

impl CpuDelta {
    /// The growth of an interrupt line (0 when it did not grow).
    pub fn interrupts_of(&self, line: &IrqLine) -> u64 {
        self.interrupts
            .iter()
            .find(|d| &d.line == line)
            .map_or(0, |d| d.count)
    }
}

fn grew(now: Option<u64>, then: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(then?))
}

fn cpu_delta(
    now: &CpuSample,
    then: &CpuSample,
    irq_now: &[InterruptRow],
    irq_then: &[InterruptRow],
) -> CpuDelta {
    let cpu = now.cpu;
    let (task_run_ns, task_run_source) = match grew(now.task_run_ns, then.task_run_ns) {
        Some(ns) => (Some(ns), Some(RunTimeSource::Schedstat)),
        None => match grew(now.busy_ns, then.busy_ns) {
            Some(ns) => (Some(ns), Some(RunTimeSource::ProcStat)),
            None => (None, None),
        },
    };
    let idle = now
        .idle_states
        .iter()
        .filter_map(|s| {
            let t = then.idle_states.iter().find(|t| t.index == s.index)?;
            let entries = s.entries.saturating_sub(t.entries);
            let time_ns = s.time_ns.saturating_sub(t.time_ns);
            (entries > 0 || time_ns > 0).then(|| IdleDelta {
                name: s.name.clone(),
                entries,
                time_ns,
            })
        })
        .collect();
    let interrupts = irq_now
        .iter()
        .filter_map(|row| {
            let before = irq_then.iter().find(|r| r.line == row.line)?;
            let count = row
                .counts
                .get(&cpu)?
                .saturating_sub(*before.counts.get(&cpu)?);
            (count > 0).then(|| InterruptDelta {
                line: row.line.clone(),
                name: row.name.clone(),
                count,
            })
        })
        .collect();
    let softirqs = now
        .softirqs
        .iter()
        .filter_map(|(name, &n)| {
            let count = n.saturating_sub(*then.softirqs.get(name)?);
            (count > 0).then(|| (name.clone(), count))
        })
        .collect();
    CpuDelta {
        cpu,
        task_run_ns,
        task_run_source,
        steal_ns: grew(now.steal_ns, then.steal_ns),
        idle,
        interrupts,
        softirqs,
    }
}

/// At most `READ_LIMIT` bytes of the file at `abs` under `root`; None when it cannot be read.
fn read_bounded(root: &Root, abs: &str) -> Option<String> {
    let file = std::fs::File::open(root.path(abs)).ok()?;
    let mut text = String::new();
    file.take(READ_LIMIT).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Clock ticks a second in /proc/stat (USER_HZ).
fn user_hz() -> u64 {
    // SAFETY: sysconf only reads a system parameter.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// The CPU number of a `cpuN` label (not the `cpu` total line).
fn cpu_label(label: &str) -> Option<Cpu> {
    label.strip_prefix("cpu")?.parse().ok()
}

/// `/proc/schedstat`: each CPU's `rq_cpu_time`, the 7th value after `cpuN` (kernel/sched/
/// stats.c, `show_schedstat`: yld_count, 0, sched_count, sched_goidle, ttwu_count,
/// ttwu_local, rq_cpu_time, run_delay, pcount).
pub fn parse_schedstat(text: &str) -> BTreeMap<Cpu, u64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = cpu_label(f.next()?)?;
            Some((cpu, f.nth(6)?.parse().ok()?))
        })
        .collect()
}

/// One CPU's line of /proc/stat, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatTimes {
    /// user + nice + system.
    pub busy_ns: u64,
    /// steal, the 8th value.
    pub steal_ns: u64,
}

/// `/proc/stat`'s `cpuN` lines (user nice system idle iowait irq softirq steal …, in
/// `user_hz` ticks a second).
pub fn parse_stat(text: &str, user_hz: u64) -> BTreeMap<Cpu, StatTimes> {
    let tick_ns = 1_000_000_000 / user_hz.max(1);
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = cpu_label(f.next()?)?;
            let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
            let times = StatTimes {
                busy_ns: (v.first()? + v.get(1)? + v.get(2)?) * tick_ns,
                steal_ns: v.get(7)? * tick_ns,
            };
            Some((cpu, times))
        })
        .collect()
}

/// The CPU of each column of a `CPU0 CPU1 …` header line (offline CPUs have no column).
fn header_columns(header: &str) -> Vec<Cpu> {
    header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect()
}

/// `/proc/softirqs`: per vector (`TIMER`…) a count per CPU column.
pub fn parse_softirqs(text: &str) -> BTreeMap<String, BTreeMap<Cpu, u64>> {
    let mut lines = text.lines();
    let columns = header_columns(lines.next().unwrap_or(""));
    lines
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let counts = columns
                .iter()
                .zip(rest.split_whitespace())
                .map(|(&cpu, n)| Some((cpu, n.parse().ok()?)))
                .collect::<Option<_>>()?;
            Some((name.trim().to_string(), counts))
        })
        .collect()
}

/// One CPU's column of a per-name table.
fn column(table: &BTreeMap<String, BTreeMap<Cpu, u64>>, cpu: Cpu) -> BTreeMap<String, u64> {
    table
        .iter()
        .filter_map(|(name, counts)| Some((name.clone(), *counts.get(&cpu)?)))
        .collect()
}

/// `/proc/interrupts`, the columns of `cpus`: every numbered IRQ and every named row that has
/// a count per CPU (ERR and MIS, one machine-wide count, are left out).
pub fn parse_interrupts(text: &str, cpus: &[Cpu]) -> Vec<InterruptRow> {
    let mut lines = text.lines();
    let columns = header_columns(lines.next().unwrap_or(""));
    lines
        .filter_map(|l| {
            let (label, rest) = l.split_once(':')?;
            let label = label.trim();
            let all: Vec<u64> = rest
                .split_whitespace()
                .take(columns.len())
                .map(|n| n.parse().ok())
                .collect::<Option<_>>()?;
            if all.len() < columns.len() {
                return None;
            }
            let counts = columns
                .iter()
                .zip(all)
                .filter(|(c, _)| cpus.contains(c))
                .map(|(&c, n)| (c, n))
                .collect();
            let line = match label.parse() {
                Ok(n) => IrqLine::Numbered(n),
                Err(_) => IrqLine::System(label.to_string()),
            };
            let name = row_name(&line, rest, columns.len());
            Some(InterruptRow { line, name, counts })
        })
        .collect()
}

/// What follows a row's counts: a numbered IRQ's actions (after the last run of two or more
/// spaces: the kernel prints the chip, the hardware IRQ and its type, then two spaces and the
/// actions), a system row's description.
fn row_name(line: &IrqLine, rest: &str, counts: usize) -> String {
    let mut tail = rest.trim_start();
    for _ in 0..counts {
        tail = tail
            .trim_start()
            .split_once(char::is_whitespace)
            .map_or("", |(_, t)| t);
    }
    let tail = tail.trim();
    match line {
        IrqLine::System(_) => tail.split_whitespace().collect::<Vec<_>>().join(" "),
        IrqLine::Numbered(_) => match tail.rfind("  ") {
            Some(i) => tail[i..].trim().to_string(),
            None => String::new(),
        },
    }
}

/// A cpuidle state from its three files' text (`name`, `usage`, `time` in µs).
pub fn parse_idle_state(index: u32, name: &str, usage: &str, time_us: &str) -> Option<IdleState> {
    Some(IdleState {
        index,
        name: name.trim().to_string(),
        entries: usage.trim().parse().ok()?,
        time_ns: time_us.trim().parse::<u64>().ok()?.saturating_mul(1000),
    })
}

/// The cpuidle states of `cpu` under `root`, in index order.
fn idle_states(root: &Root, cpu: Cpu) -> Vec<IdleState> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let Ok(entries) = std::fs::read_dir(root.path(&dir)) else {
        return Vec::new();
    };
    let mut states: Vec<IdleState> = entries
        .filter_map(|e| {
            let index: u32 = e
                .ok()?
                .file_name()
                .to_str()?
                .strip_prefix("state")?
                .parse()
                .ok()?;
            let file = |f: &str| read_bounded(root, &format!("{dir}/state{index}/{f}"));
            parse_idle_state(index, &file("name")?, &file("usage")?, &file("time")?)
        })
        .collect();
    states.sort_by_key(|s| s.index);
    states
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/interrupts of a 2-CPU KVM guest.
    const INTERRUPTS: &str = "           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 26:          0          7  IO-APIC   4-edge      ttyS0
 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
 36:     299801      68649 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 42:      13790       5600 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx
NMI:          0          0   Non-maskable interrupts
LOC:    6375027   17775498   Local timer interrupts
IWI:    4138235    3186891   IRQ work interrupts
RES:     320841     504152   Rescheduling interrupts
CAL:    1076929    2109460   Function call interrupts
TLB:     792652     786000   TLB shootdowns
ERR:          0
MIS:          0
";

    /// The same machine with CPU 0 offline and CPUs 1 and 3 left: CPU 3 is the second column.
    const INTERRUPTS_1_3: &str = "           CPU1       CPU3       
 36:         12     299801 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
LOC:       500    6375027   Local timer interrupts
ERR:          0
";

    const SOFTIRQS: &str = "                    CPU0       CPU1       
          HI:         17          0
       TIMER:     442762     290192
      NET_TX:         20          1
      NET_RX:       6998       7729
       BLOCK:     299797      68647
    IRQ_POLL:         17          0
     TASKLET:        161          2
       SCHED:     510154     462436
     HRTIMER:          0          0
         RCU:     766439     708664
";

    const STAT: &str = "cpu  3590822 0 192034 791310 9193 0 1279 5586 0 0
cpu0 1774988 0 99227 413052 4680 0 761 2873 0 0
cpu1 1815833 3 92806 378258 4513 0 517 2712 0 0
intr 123 0 0
ctxt 456
";

    /// /proc/schedstat, version 17 (two CPUs, their domain lines).
    const SCHEDSTAT: &str = "version 17
timestamp 4300912113
cpu0 0 0 0 0 0 0 1771926485371 84103993712 2473066
domain0 MC 03 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu1 0 0 0 0 0 0 1815833000000 92000000000 2610042
domain0 MC 03 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn interrupts_are_read_by_cpu_column_with_their_names() {
        let rows = parse_interrupts(INTERRUPTS, &[1]);
        let row = |l: IrqLine| rows.iter().find(|r| r.line == l).unwrap().clone();
        let req = row(IrqLine::Numbered(36));
        assert_eq!(req.name, "virtio1-req.0");
        assert_eq!(req.counts, BTreeMap::from([(1, 68649)]));
        assert_eq!(row(IrqLine::Numbered(24)).name, "ACPI:Ged");
        let loc = row(IrqLine::System("LOC".into()));
        assert_eq!(loc.name, "Local timer interrupts");
        assert_eq!(loc.counts, BTreeMap::from([(1, 17775498)]));
        for named in ["RES", "CAL", "TLB", "NMI", "IWI"] {
            assert!(rows.iter().any(|r| r.line == IrqLine::System(named.into())));
        }
        // ERR and MIS count for the whole machine, not per CPU.
        assert!(!rows.iter().any(|r| r.line == IrqLine::System("ERR".into())));
        assert_eq!(rows.len(), 11);
    }

    #[test]
    fn a_cpu_that_is_not_the_first_column_reads_its_own_column() {
        let rows = parse_interrupts(INTERRUPTS_1_3, &[3]);
        assert_eq!(rows[0].counts, BTreeMap::from([(3, 299801)]));
        assert_eq!(rows[1].counts, BTreeMap::from([(3, 6375027)]));
        let both = parse_interrupts(INTERRUPTS_1_3, &[1, 3]);
        assert_eq!(both[1].counts, BTreeMap::from([(1, 500), (3, 6375027)]));
        // A CPU with no column (offline) has no count, not 0.
        assert!(parse_interrupts(INTERRUPTS_1_3, &[0])[0].counts.is_empty());
    }

    #[test]
    fn softirqs_are_read_by_vector_and_cpu() {
        let t = parse_softirqs(SOFTIRQS);
        assert_eq!(t.len(), 10);
        assert_eq!(t["TIMER"], BTreeMap::from([(0, 442762), (1, 290192)]));
        assert_eq!(column(&t, 1)["RCU"], 708664);
        assert_eq!(column(&t, 1)["HRTIMER"], 0);
    }

    #[test]
    fn proc_stat_gives_busy_and_steal_time_in_ns() {
        let t = parse_stat(STAT, 100);
        assert_eq!(t.len(), 2, "the `cpu` total line is not a CPU");
        assert_eq!(t[&1].busy_ns, (1815833 + 3 + 92806) * 10_000_000);
        assert_eq!(t[&1].steal_ns, 2712 * 10_000_000);
        assert_eq!(parse_stat(STAT, 1000)[&0].steal_ns, 2873 * 1_000_000);
    }

    #[test]
    fn schedstat_gives_the_seventh_value_after_the_cpu() {
        let t = parse_schedstat(SCHEDSTAT);
        assert_eq!(t, BTreeMap::from([(0, 1771926485371), (1, 1815833000000)]));
    }

    #[test]
    fn an_idle_state_counts_entries_and_time_in_ns() {
        let s = parse_idle_state(2, "C1E\n", "4417\n", "912345\n").unwrap();
        assert_eq!(
            (s.name.as_str(), s.entries, s.time_ns),
            ("C1E", 4417, 912_345_000)
        );
        assert_eq!(parse_idle_state(0, "POLL", "", "0"), None);
    }

    /// A root with the files of `sample_in`, the numbers given.
    fn fake_root(dir: &std::path::Path, loc: u64, timer: u64, run_ns: u64, c1: (u64, u64)) {
        let w = |rel: &str, text: String| {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "proc/interrupts",
            INTERRUPTS_1_3.replace("6375027", &loc.to_string()),
        );
        w(
            "proc/softirqs",
            format!("          CPU1 CPU3\n  TIMER: 5 {timer}\n    RCU: 1 7\n"),
        );
        w(
            "proc/schedstat",
            format!("version 17\ntimestamp 1\ncpu3 0 0 0 0 0 0 {run_ns} 0 0\n"),
        );
        w(
            "proc/stat",
            format!("cpu3 {} 0 0 0 0 0 0 {} 0 0\n", run_ns / 10_000_000, loc),
        );
        let state = "sys/devices/system/cpu/cpu3/cpuidle/state1";
        w(&format!("{state}/name"), "C1\n".into());
        w(&format!("{state}/usage"), format!("{}\n", c1.0));
        w(&format!("{state}/time"), format!("{}\n", c1.1));
    }

    #[test]
    fn the_delta_holds_what_grew_and_leaves_out_what_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root(dir.path().to_path_buf());
        fake_root(dir.path(), 1000, 50, 2_000_000_000, (10, 300));
        let before = CpuCounters::sample_in(&root, &[3]);
        fake_root(dir.path(), 1250, 60, 2_500_000_000, (14, 700));
        let after = CpuCounters::sample_in(&root, &[3]);
        let d = after.since(&before);
        let c = d.cpu(3).unwrap();
        assert_eq!(c.task_run_ns, Some(500_000_000));
        assert_eq!(c.task_run_source, Some(RunTimeSource::Schedstat));
        assert_eq!(c.interrupts_of(&IrqLine::System("LOC".into())), 250);
        assert_eq!(c.interrupts_of(&IrqLine::Numbered(36)), 0);
        assert_eq!(c.interrupts.len(), 1, "rows that did not grow are left out");
        assert_eq!(c.softirqs, vec![("TIMER".to_string(), 10)]);
        assert_eq!(
            c.idle,
            vec![IdleDelta {
                name: "C1".into(),
                entries: 4,
                time_ns: 400_000
            }]
        );
        assert_eq!(c.steal_ns, Some(250 * 1_000_000_000 / user_hz()));
        // It goes to check's JSON and back.
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<CounterDelta>(&json).unwrap(), d);
    }

    #[test]
    fn without_schedstat_the_run_time_comes_from_proc_stat_and_absent_files_stay_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root(dir.path().to_path_buf());
        fake_root(dir.path(), 1000, 50, 2_000_000_000, (10, 300));
        std::fs::remove_file(dir.path().join("proc/schedstat")).unwrap();
        let before = CpuCounters::sample_in(&root, &[3]);
        fake_root(dir.path(), 1000, 50, 3_000_000_000, (10, 300));
        std::fs::remove_file(dir.path().join("proc/schedstat")).unwrap();
        let c = CpuCounters::sample_in(&root, &[3]).since(&before).cpus[0].clone();
        assert_eq!(c.task_run_source, Some(RunTimeSource::ProcStat));
        assert_eq!(c.task_run_ns, Some(100 * 1_000_000_000 / user_hz()));
        let empty = tempfile::tempdir().unwrap();
        let none = CpuCounters::sample_in(&Root(empty.path().to_path_buf()), &[3]);
        assert_eq!(none.cpus[0].task_run_ns, None);
        assert_eq!(none.cpus[0].steal_ns, None);
        assert!(none.interrupts.is_empty() && none.cpus[0].idle_states.is_empty());
        let d = none.since(&none).cpus[0].clone();
        assert_eq!(
            (d.task_run_ns, d.task_run_source, d.steal_ns),
            (None, None, None)
        );
    }

    #[test]
    fn a_busy_loop_shows_as_run_time_and_local_timer_interrupts_on_its_cpu() {
        let cpus = crate::platform::affinity::allowed_cpus().unwrap();
        let cpu = *cpus.last().unwrap();
        let loop_ns: u64 = 500_000_000;
        let (before, after) = std::thread::spawn(move || {
            crate::platform::affinity::pin_current_thread(cpu).unwrap();
            let before = CpuCounters::sample(&[cpu]);
            let start = crate::platform::clock::monotonic_ns();
            while crate::platform::clock::monotonic_ns() - start < loop_ns {
                std::hint::spin_loop();
            }
            (before, CpuCounters::sample(&[cpu]))
        })
        .join()
        .unwrap();
        let d = after.since(&before);
        let c = d.cpu(cpu).unwrap();
        // The CPU never idled while the loop spun: tasks ran there for about its length (the
        // loop's or others'); /proc/stat counts in whole ticks, hence the loose bound.
        let ran = c.task_run_ns.expect("schedstat or /proc/stat is readable");
        assert!(
            ran >= loop_ns / 2,
            "ran {ran} ns over a {loop_ns} ns loop: {c:?}"
        );
        assert!(
            c.interrupts_of(&IrqLine::System("LOC".into())) > 0,
            "no local timer interrupt in a {loop_ns} ns busy loop: {c:?}"
        );
    }
}
