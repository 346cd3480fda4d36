//! The metrics file (`--metrics FILE`): culprits, interruptions and transit as Prometheus
//! series for node_exporter's textfile collector, rewritten atomically every
//! `--metrics-interval` and at the end. Encoded with `prometheus-client`, then brought from
//! its OpenMetrics text to the Prometheus text format that node_exporter and `promtool` read
//! (`prometheus_text`). Owns the label set: bounded per CPU and class, and closed after the
//! first minute, so a week-long watch has as many series as a minute-long one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use anyhow::Context;

use super::files::{write_file, OutputError};
use crate::attribution::theft::{
    ClassTheft, Distribution, Label, Theft, TheftTally, THEFT_BUCKETS_NS,
};
use crate::model::{Cpu, CulpritClass, Nanos};
use crate::probe::census::CensusObserver;
use crate::probe::decode::Record;

/// Culprits with series of their own per CPU and class; the rest are `other`.
pub const CULPRIT_SERIES: usize = 20;
/// Thread names with a histogram of their own (watch); the rest are `other`.
pub const THREAD_SERIES: usize = 20;
/// A culprit series' labels as shown: the culprit (`report::culprit::label`), and its
/// container's and pod's names (`report::culprit::label_container`; empty for none). One such
/// name takes one of a CPU and class's `CULPRIT_SERIES`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Shown {
    culprit: String,
    container: String,
    pod: String,
}

impl Shown {
    fn of(label: &Label) -> Shown {
        let (container, pod) = super::culprit::label_container(label);
        Shown {
            culprit: super::culprit::label(label),
            container,
            pod,
        }
    }

    fn other() -> Shown {
        Shown {
            culprit: OTHER.to_string(),
            container: String::new(),
            pod: String::new(),
        }
    }
}

/// A class's culprits by their labels as shown.
fn shown_culprits(class: &ClassTheft) -> HashMap<Shown, Theft> {
    let mut shown: HashMap<Shown, Theft> = HashMap::with_capacity(class.culprits.len());
    for (label, t) in &class.culprits {
        let s = shown.entry(Shown::of(label)).or_default();
        s.episodes += t.episodes;
        s.stolen_ns += t.stolen_ns;
    }
    shown
}

/// Free series go to new culprits (and thread names) until this long after recording
/// started; then the label set is closed and series are neither added nor removed.
pub const LABELS_OPEN_NS: Nanos = 60_000_000_000;
/// The label of everything without a series of its own.
pub const OTHER: &str = "other";
/// Upper bounds (ns) of the transit histogram's buckets: 100, 250 and 500 ns, then the
/// interruptions' (1 µs to 1 s).
fn transit_bounds() -> Vec<Nanos> {
    [100, 250, 500]
        .into_iter()
        .chain(THEFT_BUCKETS_NS)
        .collect()
}

/// A `--metrics` flag that cannot be used (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics {path}: is a directory; give a file in it, e.g. {path}/jitterscope.prom")]
    IsDirectory { path: String },
    #[error("--metrics {path}: the directory {dir} does not exist; create it (the directory node_exporter's --collector.textfile.directory names) or give a file in an existing directory")]
    NoDirectory { path: String, dir: String },
    #[error("--metrics {path}: cannot write in {dir}: {source}; give a file in a directory you can write to")]
    NotWritable {
        path: String,
        dir: String,
        source: std::io::Error,
    },
}

/// Where the metrics go and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsPlan {
    pub path: PathBuf,
    pub interval_ns: Nanos,
}

impl MetricsPlan {
    /// Checks that the file can be written where it is asked for: its directory exists and
    /// takes files (it is never created: node_exporter reads a directory of its own).
    pub fn check(path: &Path, interval_ns: Nanos) -> Result<MetricsPlan, MetricsError> {
        let shown = path.display().to_string();
        if path.is_dir() {
            return Err(MetricsError::IsDirectory { path: shown });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(MetricsError::NoDirectory {
                path: shown,
                dir: dir.display().to_string(),
            });
        }
        let probe = dir.join(format!(".jitterscope-probe.{}", std::process::id()));
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe);
        match created {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
            }
            Err(source) => {
                return Err(MetricsError::NotWritable {
                    path: shown,
                    dir: dir.display().to_string(),
                    source,
                })
            }
        }
        Ok(MetricsPlan {
            path: path.to_path_buf(),
            interval_ns,
        })
    }

    /// The `source` label of every series: the file's name without `.prom`. node_exporter
    /// drops a series that another file in its directory already exported, so two
    /// jitterscope processes writing two files must never export the same one.
    pub fn source(&self) -> String {
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        name.strip_suffix(".prom").unwrap_or(&name).to_string()
    }

    /// node_exporter's textfile collector reads `*.prom` files only.
    pub fn collector_reads_it(&self) -> bool {
        self.path.extension().is_some_and(|e| e == "prom")
    }
}

/// What jitterscope is doing (the `mode` label of `jitterscope_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Run,
    Watch,
    Probe,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Watch => "watch",
            Mode::Probe => "probe",
        }
    }

    /// Whether a class can take time in this mode: its series exist from the first rewrite,
    /// so none appears later.
    fn takes_time(self, class: CulpritClass) -> bool {
        use CulpritClass as C;
        match class {
            C::Kworker
            | C::Kthread
            | C::Task
            | C::Irq
            | C::Softirq
            | C::TimerTick
            | C::Ipi
            | C::Nmi
            | C::SelfNoise => true,
            // Only the probes' switches of a workload or watched thread make it.
            C::Throttled => self != Mode::Probe,
            // Named beside a stall, never given time.
            C::FreqChange => false,
            C::Fault => self == Mode::Watch,
            // Decided by the engine over a stall's uncovered time: not kernel records.
            C::Hypervisor | C::Unexplained | C::Lost => self != Mode::Probe,
        }
    }
}

/// One consumer's transit histogram (run).
pub struct ConsumerSeries<'a> {
    pub consumer: String,
    pub cpu: Cpu,
    pub transit: &'a Histogram<u64>,
}

/// One watched thread's interruptions (watch).
pub struct ThreadSeries<'a> {
    /// Kernel thread id: a thread keeps the label it first had.
    pub tid: u32,
    pub name: &'a str,
    pub interruptions: &'a Histogram<u64>,
}

/// What the session knows now, read at each rewrite.
pub struct Exposure<'a> {
    pub now_ns: Nanos,
    /// Since recording started.
    pub elapsed_ns: Nanos,
    /// The CPUs measured (watched): their series exist from the start.
    pub cpus: &'a [Cpu],
    pub theft: &'a TheftTally,
    /// KVM steal-clock growth per CPU.
    pub steal_ns: &'a BTreeMap<Cpu, Nanos>,
    pub lost: &'a BTreeMap<Cpu, u64>,
    /// jitterscope's own CPU time (the workload's threads not included).
    pub own_cpu_ns: u64,
    pub consumers: Vec<ConsumerSeries<'a>>,
    pub threads: Vec<ThreadSeries<'a>>,
}

/// Bucket counts (not cumulative; the last bucket is `+Inf`), their sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
struct Buckets {
    sum_s: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl Buckets {
    fn empty(bounds_ns: &[Nanos]) -> Self {
        Buckets {
            sum_s: 0.0,
            count: 0,
            buckets: bounds_ns
                .iter()
                .map(|&b| b as f64 / 1e9)
                .chain([f64::INFINITY])
                .map(|le| (le, 0))
                .collect(),
        }
    }

    fn of(d: &Distribution) -> Self {
        let mut b = Buckets::empty(&THEFT_BUCKETS_NS);
        for (slot, &n) in b.buckets.iter_mut().zip(&d.buckets) {
            slot.1 = n;
        }
        b.count = d.observations();
        b.sum_s = d.observed_ns as f64 / 1e9;
        b
    }

    /// An HdrHistogram of nanoseconds in these buckets; a value on a bound is inside it.
    fn of_hdr(bounds_ns: &[Nanos], h: &Histogram<u64>) -> Self {
        let mut b = Buckets::empty(bounds_ns);
        let mut sum_ns = 0f64;
        for v in h.iter_recorded() {
            let at = v.value_iterated_to();
            let i = bounds_ns.partition_point(|&x| x < h.lowest_equivalent(at));
            b.buckets[i].1 += v.count_at_value();
            sum_ns += h.median_equivalent(at) as f64 * v.count_at_value() as f64;
        }
        b.count = h.len();
        b.sum_s = sum_ns / 1e9;
        b
    }

    fn add(&mut self, other: &Buckets) {
        self.sum_s += other.sum_s;
        self.count += other.count;
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.1 += b.1;
        }
    }
}

type Labels = Vec<(&'static str, String)>;

/// The series of one rewrite, as plain data for the encoder.
#[derive(Debug, Default)]
struct Families {
    info: Labels,
    stolen: Vec<(Labels, f64)>,
    interruptions: Vec<(Labels, u64)>,
    durations: Vec<(Labels, Buckets)>,
    stalls: Vec<(Labels, Buckets)>,
    transit: Vec<(Labels, Buckets)>,
    threads: Vec<(Labels, Buckets)>,
    steal: Vec<(Labels, f64)>,
    lost: Vec<(Labels, u64)>,
    own_cpu_s: f64,
}

fn counters<V: prometheus_client::encoding::EncodeCounterValue + Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, V)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn histograms(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, Buckets)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, b) in rows {
        m.encode_family(labels)?
            .encode_histogram::<NoLabelSet>(b.sum_s, b.count, &b.buckets, None)?;
    }
    Ok(())
}

impl Collector for Families {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let mut m = enc.encode_descriptor(
            "jitterscope_info",
            "jitterscope's version, the kernel, the host kind (vm or metal) and the mode (run, watch or probe); always 1.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1i64).encode(m.encode_family(&self.info)?)?;
        counters(&mut enc, "jitterscope_stolen_seconds", "Time taken from the measured threads (run: the workload's stalls; watch: the watched threads; probe: the CPU's time in the kernel records), per CPU, culprit class and culprit (the top 20 per CPU and class, the rest as other).", &self.stolen)?;
        counters(&mut enc, "jitterscope_interruptions", "Episodes (kernel records, uncovered pieces) that took time, per CPU, culprit class and culprit.", &self.interruptions)?;
        histograms(&mut enc, "jitterscope_interruption_seconds", "A class's part of one interruption (run: of one stall; watch: of one interruption of a watched thread; probe: one kernel record), per CPU and class.", &self.durations)?;
        histograms(
            &mut enc,
            "jitterscope_stall_seconds",
            "Whole stalls of the workload's threads (run) or interruptions of the watched threads (watch), per CPU.",
            &self.stalls,
        )?;
        histograms(
            &mut enc,
            "jitterscope_transit_seconds",
            "Message transit from the producer's publish to the consumer's receive, per consumer.",
            &self.transit,
        )?;
        histograms(&mut enc, "jitterscope_thread_interruption_seconds", "Interruptions of the watched threads (on-CPU, preempted, host preemption), per thread name.", &self.threads)?;
        counters(&mut enc, "jitterscope_steal_seconds", "Growth of the CPU's KVM steal clock while recording (the host kept the vCPU off its CPU).", &self.steal)?;
        counters(
            &mut enc,
            "jitterscope_lost_records",
            "Kernel records lost (record ring full), per CPU.",
            &self.lost,
        )?;
        let m = enc.encode_descriptor(
            "jitterscope_cpu_seconds",
            "CPU time of jitterscope itself (the workload's threads not included).",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.own_cpu_s).encode(m)
    }
}

/// prometheus-client writes OpenMetrics text; node_exporter's textfile collector and
/// `promtool check metrics` parse the Prometheus text format (0.0.4). Two differences
/// matter: an OpenMetrics counter's HELP and TYPE name the family without `_total` while its
/// samples carry it — the 0.0.4 parser then files the samples under an untyped family of
/// their own, without help — and the `# EOF` terminator (a comment there, dropped). `# UNIT`
/// lines, unused here, would be comments too.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let described = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match described {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or_default();
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push_str(&rest[name.len()..]);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The metrics file over a session: the label set, and the rewrites.
pub struct MetricsFile {
    plan: MetricsPlan,
    mode: Mode,
    kernel: String,
    host: &'static str,
    next_ns: Nanos,
    /// Culprits with series of their own, per (CPU, class); never removed.
    named: BTreeMap<(Cpu, CulpritClass), Vec<Shown>>,
    /// Thread names with series of their own; never removed.
    thread_names: Vec<String>,
    /// The label each thread was given (kept when it renames itself).
    thread_label: HashMap<u32, String>,
    /// Per thread: its histogram's count when last bucketed, and the buckets.
    thread_buckets: HashMap<u32, (u64, Buckets)>,
    own_cpu_ns: u64,
    /// The first failed rewrite (later ones are tried at each interval), and how many
    /// failed.
    pub error: Option<OutputError>,
    pub failures: u64,
}

impl MetricsFile {
    pub fn new(plan: MetricsPlan, mode: Mode) -> Self {
        MetricsFile {
            plan,
            mode,
            kernel: crate::system::kernel_release(),
            host: if crate::system::is_virtual_machine() {
                "vm"
            } else {
                "metal"
            },
            next_ns: 0,
            named: BTreeMap::new(),
            thread_names: Vec::new(),
            thread_label: HashMap::new(),
            thread_buckets: HashMap::new(),
            own_cpu_ns: 0,
            error: None,
            failures: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.plan.path
    }

    /// The lines that name the file at the end, and the failed rewrites before a last one
    /// that worked.
    pub fn closing_lines(&self) -> Vec<String> {
        let mut lines = vec![format!(
            "metrics:      {} (Prometheus text)",
            self.plan.path.display()
        )];
        if let Some(e) = &self.error {
            lines.push(format!(
                "note: {} rewrite{} of the metrics file failed (the first: {e}); the last one worked",
                self.failures,
                if self.failures == 1 { "" } else { "s" }
            ));
        }
        lines
    }

    /// A rewrite is due (the first one at once).
    pub fn due(&self, now_ns: Nanos) -> bool {
        now_ns >= self.next_ns
    }

    /// When the next rewrite is due.
    pub fn next_due(&self) -> Nanos {
        self.next_ns
    }

    /// Rewrites the file now; the next one is due an interval later. A failure is counted,
    /// the first one kept in `error`.
    pub fn write(&mut self, e: &Exposure) -> Result<(), String> {
        self.next_ns = e.now_ns.saturating_add(self.plan.interval_ns);
        let text = self.render(e);
        match write_file(&self.plan.path, text.as_bytes()) {
            Ok(()) => Ok(()),
            Err(err) => {
                let shown = err.to_string();
                self.failures += 1;
                self.error.get_or_insert(err);
                Err(shown)
            }
        }
    }

    /// The file's text for what is known now (admitting culprits while the label set is
    /// open).
    pub fn render(&mut self, e: &Exposure) -> String {
        let open = e.elapsed_ns < LABELS_OPEN_NS;
        if open {
            self.admit_culprits(e.theft);
        }
        self.own_cpu_ns = self.own_cpu_ns.max(e.own_cpu_ns);
        let mut f = Families {
            info: vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("kernel", self.kernel.clone()),
                ("host", self.host.to_string()),
                ("mode", self.mode.as_str().to_string()),
            ],
            own_cpu_s: self.own_cpu_ns as f64 / 1e9,
            ..Families::default()
        };
        self.culprit_series(e, &mut f);
        f.transit = e
            .consumers
            .iter()
            .map(|c| {
                (
                    vec![("consumer", c.consumer.clone()), ("cpu", c.cpu.to_string())],
                    Buckets::of_hdr(&transit_bounds(), c.transit),
                )
            })
            .collect();
        if self.mode == Mode::Watch {
            f.threads = self.thread_series(&e.threads, open);
        }
        for &cpu in e.cpus {
            let l = vec![("cpu", cpu.to_string())];
            if self.mode != Mode::Probe {
                let b = e
                    .theft
                    .stalls
                    .get(&cpu)
                    .map_or_else(|| Buckets::empty(&THEFT_BUCKETS_NS), Buckets::of);
                f.stalls.push((l.clone(), b));
            }
            let steal = e.steal_ns.get(&cpu).copied().unwrap_or(0);
            f.steal.push((l.clone(), steal as f64 / 1e9));
            f.lost.push((l, e.lost.get(&cpu).copied().unwrap_or(0)));
        }
        let source = (
            std::borrow::Cow::Borrowed("source"),
            std::borrow::Cow::Owned(self.plan.source()),
        );
        let mut registry = Registry::with_labels([source].into_iter());
        registry.register_collector(Box::new(f));
        let mut text = String::new();
        // Writing into a String cannot fail; a collector error would leave the text short,
        // which the next rewrite replaces.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        prometheus_text(&text)
    }

    /// Free series of each CPU and class to its culprits with the most stolen time.
    /// (Series are named by the culprits' labels as shown: `shown_culprits`.)
    fn admit_culprits(&mut self, theft: &TheftTally) {
        for (&key, class) in &theft.by {
            let named = self.named.entry(key).or_default();
            let free = CULPRIT_SERIES.saturating_sub(named.len());
            if free == 0 {
                continue;
            }
            let shown = shown_culprits(class);
            let mut waiting: Vec<(&Shown, Nanos)> = shown
                .iter()
                // A culprit called `other` would clash with the rest: it stays in it.
                .filter(|(l, t)| t.stolen_ns > 0 && l.culprit != OTHER && !named.contains(l))
                .map(|(l, t)| (l, t.stolen_ns))
                .collect();
            waiting.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            named.extend(waiting.into_iter().take(free).map(|(l, _)| l.clone()));
        }
    }

    /// Stolen time, episodes and the distribution per CPU and class: every measured CPU
    /// with every class that takes time in this mode, and whatever else was seen.
    fn culprit_series(&self, e: &Exposure, f: &mut Families) {
        let mut keys: Vec<(Cpu, CulpritClass)> = e
            .cpus
            .iter()
            .flat_map(|&cpu| CulpritClass::ALL.iter().map(move |&c| (cpu, c)))
            .filter(|&(_, c)| self.mode.takes_time(c))
            .collect();
        keys.extend(e.theft.by.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        let none = Vec::new();
        for key in keys {
            let (cpu, class) = key;
            let labels = |s: &Shown| {
                vec![
                    ("cpu", cpu.to_string()),
                    ("class", class.as_str().to_string()),
                    ("culprit", s.culprit.clone()),
                    ("container", s.container.clone()),
                    ("pod", s.pod.clone()),
                ]
            };
            let t = e.theft.by.get(&key);
            let shown = t.map(shown_culprits).unwrap_or_default();
            let mut rest = t.map(|t| t.total).unwrap_or_default();
            for name in self.named.get(&key).unwrap_or(&none) {
                let c = shown.get(name).copied();
                let c = c.unwrap_or_default();
                rest.episodes = rest.episodes.saturating_sub(c.episodes);
                rest.stolen_ns = rest.stolen_ns.saturating_sub(c.stolen_ns);
                f.stolen.push((labels(name), c.stolen_ns as f64 / 1e9));
                f.interruptions.push((labels(name), c.episodes));
            }
            let other = Shown::other();
            f.stolen.push((labels(&other), rest.stolen_ns as f64 / 1e9));
            f.interruptions.push((labels(&other), rest.episodes));
            let durations = match t {
                Some(t) => Buckets::of(&t.parts),
                None => Buckets::empty(&THEFT_BUCKETS_NS),
            };
            f.durations.push((
                vec![
                    ("cpu", cpu.to_string()),
                    ("class", class.as_str().to_string()),
                ],
                durations,
            ));
        }
    }

    /// Each thread name's interruptions: every thread keeps the label it was first given;
    /// names are admitted, busiest first, while the label set is open.
    fn thread_series(&mut self, threads: &[ThreadSeries], open: bool) -> Vec<(Labels, Buckets)> {
        let mut unlabelled: Vec<&ThreadSeries> = threads
            .iter()
            .filter(|t| !self.thread_label.contains_key(&t.tid))
            .collect();
        unlabelled.sort_by_key(|t| std::cmp::Reverse(t.interruptions.len()));
        for t in unlabelled {
            let name = if t.name.is_empty() { "unnamed" } else { t.name };
            let known = self.thread_names.iter().any(|n| n == name);
            let room = open && self.thread_names.len() < THREAD_SERIES && name != OTHER;
            let label = if known || room {
                if !known {
                    self.thread_names.push(name.to_string());
                }
                name.to_string()
            } else {
                OTHER.to_string()
            };
            self.thread_label.insert(t.tid, label);
        }
        let mut by: BTreeMap<String, Buckets> = self
            .thread_names
            .iter()
            .map(String::as_str)
            .chain([OTHER])
            .map(|n| (n.to_string(), Buckets::empty(&THEFT_BUCKETS_NS)))
            .collect();
        for t in threads {
            let len = t.interruptions.len();
            let cached = self.thread_buckets.get(&t.tid).filter(|c| c.0 == len);
            let b = match cached {
                Some(c) => c.1.clone(),
                None => {
                    let b = Buckets::of_hdr(&THEFT_BUCKETS_NS, t.interruptions);
                    self.thread_buckets.insert(t.tid, (len, b.clone()));
                    b
                }
            };
            if let Some(sum) = self.thread_label.get(&t.tid).and_then(|l| by.get_mut(l)) {
                sum.add(&b);
            }
        }
        by.into_iter()
            .map(|(name, b)| (vec![("thread", name)], b))
            .collect()
    }
}

/// `jitterscope probe --metrics`: the census's records as they come, rewritten on time.
pub struct ProbeMetrics {
    file: MetricsFile,
    cpus: Vec<Cpu>,
    theft: TheftTally,
    steal_ns: BTreeMap<Cpu, Nanos>,
    lost: BTreeMap<Cpu, u64>,
}

impl ProbeMetrics {
    pub fn new(plan: MetricsPlan, cpus: Vec<Cpu>) -> Self {
        ProbeMetrics {
            file: MetricsFile::new(plan, Mode::Probe),
            cpus,
            theft: TheftTally::default(),
            steal_ns: BTreeMap::new(),
            lost: BTreeMap::new(),
        }
    }

    fn write(&mut self, start_ns: Nanos, now_ns: Nanos) -> Result<(), String> {
        let e = Exposure {
            now_ns,
            elapsed_ns: now_ns.saturating_sub(start_ns),
            cpus: &self.cpus,
            theft: &self.theft,
            steal_ns: &self.steal_ns,
            lost: &self.lost,
            own_cpu_ns: crate::system::cputime::process_cpu_ns(),
            consumers: Vec::new(),
            threads: Vec::new(),
        };
        self.file.write(&e)
    }
}

impl CensusObserver for ProbeMetrics {
    fn batch(&mut self, records: &[Record]) {
        for r in records {
            match r {
                Record::Interruption(i) if i.end_ns > i.start_ns => {
                    let label = Label::of(&i.who);
                    self.theft.record(i.cpu, i.class, label, i.duration_ns());
                }
                Record::Steal(st) => *self.steal_ns.entry(st.cpu).or_default() += st.steal_ns,
                Record::Lost { cpu, count, .. } => *self.lost.entry(*cpu).or_default() += count,
                Record::Interruption(_)
                | Record::Cause(_)
                | Record::Wait(_)
                | Record::Thread(_) => {}
            }
        }
    }

    fn tick(&mut self, start_ns: Nanos, now_ns: Nanos) {
        if !self.file.due(now_ns) {
            return;
        }
        if let Err(why) = self.write(start_ns, now_ns) {
            if self.file.failures == 1 {
                eprintln!("WARNING: the metrics file was not rewritten: {why}; trying again every interval");
            }
        }
    }

    fn end(&mut self, start_ns: Nanos, now_ns: Nanos) -> anyhow::Result<()> {
        self.write(start_ns, now_ns)
            .map_err(|why| anyhow::anyhow!("{why}"))
            .context(
                "the metrics file was not rewritten at the end (the summary above is complete)",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_described_by_their_total_and_eof_goes() {
        let om = "# HELP a_seconds Help.\n# TYPE a_seconds counter\na_seconds_total{x=\"1\"} 2.0\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP a_seconds_total Help.\n# TYPE a_seconds_total counter\na_seconds_total{x=\"1\"} 2.0\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n"
        );
    }

    /// Every sample line as (series, value).
    fn samples(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    /// 50 new culprits per class and CPU, later rounds heavier: a late culprit outweighs
    /// every named one and must still land in `other`.
    fn feed_round(tally: &mut TheftTally, round: u64, cpus: &[Cpu]) {
        for &cpu in cpus {
            for class in [CulpritClass::Task, CulpritClass::Kworker] {
                for i in 0..50 {
                    let ns = (round + 1) * 1_000 * (i + 1);
                    let label = Label::Comm(format!("c{round}-{i}").into());
                    tally.record(cpu, class, label, ns);
                }
            }
        }
    }

    /// Stolen-seconds series per (cpu, class) label pair.
    fn stolen_series_per_cpu_and_class(
        samples: &BTreeMap<String, f64>,
    ) -> BTreeMap<(String, String), usize> {
        let label = |k: &str, name: &str| -> String {
            let key = format!("{name}=\"");
            k.split(key.as_str())
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or_default()
                .to_string()
        };
        let mut per = BTreeMap::new();
        for k in samples
            .keys()
            .filter(|k| k.starts_with("jitterscope_stolen_seconds_total"))
        {
            *per.entry((label(k, "cpu"), label(k, "class"))).or_default() += 1;
        }
        per
    }

    /// Tasks named `sh` in a new container each (`c<round>-<i>`, of pod `prod/p<i>`), and
    /// tasks in none.
    fn feed_containers(tally: &mut TheftTally, round: u64, cpus: &[Cpu]) {
        for &cpu in cpus {
            for i in 0..50u64 {
                let ns = (round + 1) * 1_000 * (i + 1);
                let label = if i % 2 == 0 {
                    Label::Contained {
                        comm: "sh".into(),
                        container: std::sync::Arc::new(crate::model::ContainerTag {
                            name: format!("c{round}-{i}"),
                            runtime: "containerd".into(),
                            short_id: format!("beef{:08x}", round * 1000 + i),
                            pod: Some(format!("prod/p{i}")),
                        }),
                    }
                } else {
                    Label::Comm(format!("t{round}-{i}").into())
                };
                tally.record(cpu, CulpritClass::Task, label, ns);
            }
        }
    }

    #[test]
    fn containers_and_pods_are_labels_by_name_within_the_same_series_bound() {
        let plan = MetricsPlan {
            path: PathBuf::from("/nonexistent/x.prom"),
            interval_ns: 1_000_000_000,
        };
        let mut file = MetricsFile::new(plan, Mode::Watch);
        let mut tally = TheftTally::default();
        let (steal, lost) = (BTreeMap::new(), BTreeMap::new());
        let cpus = [1];
        let mut counts = Vec::new();
        let mut text = String::new();
        for round in 0..12u64 {
            feed_containers(&mut tally, round, &cpus);
            let elapsed_ns = round * 10_000_000_000;
            text = file.render(&Exposure {
                now_ns: elapsed_ns,
                elapsed_ns,
                cpus: &cpus,
                theft: &tally,
                steal_ns: &steal,
                lost: &lost,
                own_cpu_ns: 1,
                consumers: Vec::new(),
                threads: Vec::new(),
            });
            let now = samples(&text);
            let per = stolen_series_per_cpu_and_class(&now);
            // Many containers of one command name: still 20 named series and `other`.
            assert_eq!(
                per[&("1".to_string(), "task".to_string())],
                CULPRIT_SERIES + 1
            );
            assert!(per.values().all(|&n| n <= CULPRIT_SERIES + 1), "{per:?}");
            counts.push(now.len());
        }
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        assert_eq!(counts[6..].iter().min(), counts[6..].iter().max(), "closed");
        let stolen: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("jitterscope_stolen_seconds_total{"))
            .collect();
        assert!(
            stolen.iter().any(|l| l.contains("culprit=\"sh\"")
                && l.contains("container=\"c0-48\"")
                && l.contains("pod=\"prod/p48\"")),
            "{text}"
        );
        assert!(
            stolen.iter().any(|l| l.contains("culprit=\"t0-49\"")
                && l.contains("container=\"\"")
                && l.contains("pod=\"\"")),
            "{text}"
        );
        assert!(
            stolen
                .iter()
                .any(|l| l.contains("culprit=\"other\"") && l.contains("container=\"\"")),
            "{text}"
        );
        assert!(!text.contains("beef"), "no container id in a label: {text}");
    }

    #[test]
    fn many_culprits_keep_21_series_per_cpu_and_class_and_counters_only_grow() {
        let plan = MetricsPlan {
            path: PathBuf::from("/nonexistent/x.prom"),
            interval_ns: 1_000_000_000,
        };
        let mut file = MetricsFile::new(plan, Mode::Run);
        let mut tally = TheftTally::default();
        let (steal, lost) = (BTreeMap::new(), BTreeMap::new());
        let cpus = [1, 3];
        let mut before: BTreeMap<String, f64> = BTreeMap::new();
        let mut closed_counts = Vec::new();
        for round in 0..12u64 {
            feed_round(&mut tally, round, &cpus);
            let elapsed_ns = round * 10_000_000_000;
            let text = file.render(&Exposure {
                now_ns: elapsed_ns,
                elapsed_ns,
                cpus: &cpus,
                theft: &tally,
                steal_ns: &steal,
                lost: &lost,
                own_cpu_ns: 1,
                consumers: Vec::new(),
                threads: Vec::new(),
            });
            let now = samples(&text);
            let per = stolen_series_per_cpu_and_class(&now);
            assert!(per.values().all(|&n| n <= CULPRIT_SERIES + 1), "{per:?}");
            assert_eq!(per[&("1".to_string(), "task".to_string())], 21);
            for (k, v) in &before {
                let v2 = now
                    .get(k)
                    .unwrap_or_else(|| panic!("{k} went away in round {round}"));
                assert!(v2 >= v, "{k} went down from {v} to {v2} in round {round}");
            }
            if elapsed_ns >= LABELS_OPEN_NS {
                closed_counts.push(now.len());
            }
            before = now;
        }
        assert!(
            closed_counts.windows(2).all(|w| w[0] == w[1]),
            "{closed_counts:?}"
        );
        // What is not named is in `other`: named + other = the class's total.
        let c = &tally.by[&(1, CulpritClass::Task)];
        let named: f64 = before
            .iter()
            .filter(|(k, _)| {
                k.starts_with("jitterscope_stolen_seconds_total{")
                    && k.contains("cpu=\"1\",class=\"task\"")
            })
            .map(|(_, v)| v)
            .sum();
        assert!((named - c.total.stolen_ns as f64 / 1e9).abs() < 1e-6);
    }

    #[test]
    fn a_thread_keeps_its_label_and_names_past_20_or_the_first_minute_are_other() {
        let plan = MetricsPlan {
            path: PathBuf::from("/nonexistent/w.prom"),
            interval_ns: 1_000_000_000,
        };
        let mut file = MetricsFile::new(plan, Mode::Watch);
        let mut h = crate::attribution::watch::new_histogram();
        h.record(3_000).unwrap();
        let names: Vec<String> = (0..25).map(|i| format!("worker-{i}")).collect();
        let threads: Vec<ThreadSeries> = names
            .iter()
            .enumerate()
            .map(|(i, n)| ThreadSeries {
                tid: i as u32 + 100,
                name: n,
                interruptions: &h,
            })
            .collect();
        let series = file.thread_series(&threads, true);
        assert_eq!(series.len(), THREAD_SERIES + 1);
        let other = series.iter().find(|s| s.0[0].1 == OTHER).unwrap();
        assert_eq!(other.1.count, 5);
        // Renamed, and a new thread after the first minute: labels do not move.
        let renamed = ThreadSeries {
            tid: 100,
            name: "renamed",
            interruptions: &h,
        };
        let late = ThreadSeries {
            tid: 999,
            name: "late",
            interruptions: &h,
        };
        let series = file.thread_series(&[renamed, late], false);
        assert_eq!(series.len(), THREAD_SERIES + 1);
        let count = |name: &str| series.iter().find(|s| s.0[0].1 == name).unwrap().1.count;
        assert_eq!(count("worker-0"), 1);
        assert_eq!(count(OTHER), 1);
    }

    #[test]
    fn hdr_values_on_a_bound_stay_inside_it() {
        let mut h = crate::attribution::watch::new_histogram();
        h.record(1_000).unwrap();
        // The next value a thread's histogram tells apart from 1 µs (2 significant digits).
        h.record(1_008).unwrap();
        h.record(2_000_000_000).unwrap();
        let b = Buckets::of_hdr(&THEFT_BUCKETS_NS, &h);
        assert_eq!(b.count, 3);
        assert_eq!(b.buckets[0].1, 1);
        assert_eq!(b.buckets[1].1, 1);
        assert_eq!(b.buckets.last().unwrap().1, 1);
        assert!((b.sum_s - 2.000002).abs() < 1e-3);
    }

    #[test]
    fn a_shell_loops_processes_are_one_series_named_by_command() {
        use crate::attribution::engine::{Share, Verdict};
        use crate::model::{Culprit, Stall, ThreadRole, Who};
        let mut tally = TheftTally::default();
        let mut add = |comm: &str, pid: u32, ns: Nanos| {
            tally.add(&Verdict {
                stall: Stall {
                    cpu: 1,
                    thread: ThreadRole::Watched(7),
                    start_ns: 0,
                    end_ns: ns,
                },
                culprits: vec![Share {
                    culprit: Culprit {
                        class: CulpritClass::Task,
                        who: Who::Task {
                            comm: comm.into(),
                            pid,
                            policy: 0,
                            container: None,
                        },
                    },
                    via: None,
                    measured_ns: ns,
                    inferred_ns: 0,
                    host_ns: 0,
                    episodes: 1,
                    longest_ns: ns,
                    share: 1.0,
                }],
                explained_share: 1.0,
                incomplete: false,
                timeline: vec![],
                hypervisor: vec![],
            })
        };
        for pid in 0..30u32 {
            add(
                "taskset",
                5000 + pid,
                if pid == 7 { 1_010_000 } else { 1_000_000 },
            );
        }
        add("bash", 4121, 40_000_000);
        let plan = MetricsPlan {
            path: PathBuf::from("/nonexistent/x.prom"),
            interval_ns: 1_000_000_000,
        };
        let (steal, lost) = (BTreeMap::new(), BTreeMap::new());
        let text = MetricsFile::new(plan, Mode::Watch).render(&Exposure {
            now_ns: 1,
            elapsed_ns: 1,
            cpus: &[1],
            theft: &tally,
            steal_ns: &steal,
            lost: &lost,
            own_cpu_ns: 1,
            consumers: Vec::new(),
            threads: Vec::new(),
        });
        let now = samples(&text);
        let series = |name: &str| -> Vec<(&str, f64)> {
            now.iter()
                .filter(|(k, _)| k.starts_with(name) && k.contains("class=\"task\""))
                .filter(|(k, _)| !k.contains("culprit=\"other\""))
                .map(|(k, v)| (k.as_str(), *v))
                .collect()
        };
        let stolen = series("jitterscope_stolen_seconds_total{");
        assert_eq!(stolen.len(), 2, "{text}");
        let taskset = stolen
            .iter()
            .find(|(k, _)| k.contains("culprit=\"taskset\""));
        assert!((taskset.expect("one taskset series").1 - 0.03001).abs() < 1e-9);
        let count = series("jitterscope_interruptions_total{");
        let taskset = count
            .iter()
            .find(|(k, _)| k.contains("culprit=\"taskset\""));
        assert_eq!(taskset.map(|t| t.1), Some(30.0), "{text}");
        assert!(!text.contains("taskset["), "no pid in a label: {text}");
    }
}
