//! The experiment: a producer busy-spins and publishes a timestamped message every
//! `interval`; consumers busy-poll the ring and record transit and inter-message latency.
//! Every spinning thread also watches its own clock and reports the windows in which its
//! loop did not run (stalls) — the unit jitterscope attributes.
//!
//! Hot path rules: no allocation, no syscall, no lock. Everything leaves a spinning thread
//! through lock-free SPSC queues that the session drains from its own thread.

pub use crate::platform::affinity;
pub use crate::platform::clock;
pub mod histograms;
pub mod pingpong;
pub mod ring;
pub mod spsc;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::model::{Cpu, Nanos, Spike, Stall, ThreadRole};
use clock::monotonic_ns;
use histograms::IntervalHistograms;

/// Settings of one workload run (already validated by the CLI).
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub producer_cpu: Cpu,
    pub consumer_cpus: Vec<Cpu>,
    /// false: the seed's BASELINE, threads float wherever the scheduler puts them.
    pub pin: bool,
    /// Unpinned threads may run on these CPUs (the process's own set, which the collector
    /// thread that spawns them may have narrowed for itself); empty: inherit.
    pub float_cpus: Vec<Cpu>,
    pub interval_ns: Nanos,
    pub warmup_ns: Nanos,
    pub duration_ns: Nanos,
    pub stall_threshold_ns: Nanos,
    /// A message whose transit exceeds this is reported as a spike; one per delay episode
    /// (messages queued behind a late one are not spikes of their own).
    pub spike_threshold_ns: Nanos,
    /// Length of one interval histogram (the .hlog and live-view granularity).
    pub histogram_interval_ns: Nanos,
    pub ring_capacity: usize,
    pub stall_queue_capacity: usize,
    /// Interval histogram boxes made before recording, per consumer (see `interval_pool_at_end`).
    pub interval_pool: usize,
    /// The consumers' SCHED_FIFO priority (`--fifo`); None: SCHED_OTHER. The producer stays
    /// SCHED_OTHER.
    pub consumer_fifo: Option<u8>,
}

/// The default stall threshold (`--stall-threshold auto`, and every workshop step): 10× the
/// loop period measured here, at least 1 µs.
pub fn auto_stall_threshold_ns() -> Nanos {
    (clock::loop_period_ns(200_000) * 10).max(1_000)
}

impl WorkloadConfig {
    pub fn new(producer_cpu: Cpu, consumer_cpus: Vec<Cpu>) -> Self {
        WorkloadConfig {
            producer_cpu,
            consumer_cpus,
            pin: true,
            float_cpus: Vec::new(),
            interval_ns: 10_000,
            warmup_ns: 1_000_000_000,
            duration_ns: 10_000_000_000,
            stall_threshold_ns: 2_000,
            spike_threshold_ns: 10_000,
            histogram_interval_ns: 1_000_000_000,
            ring_capacity: 4096,
            stall_queue_capacity: 32768,
            interval_pool: POOL_PER_CONSUMER,
            consumer_fifo: None,
        }
    }

    /// Deciding the culprits at the end: stall and spike queues that hold a run's worth
    /// (`AT_END_STALL_QUEUE`), and an interval box made before recording for each second of
    /// it (`histograms::interval_pool_at_end`). Set once the duration is.
    pub fn hold_for_the_end(&mut self) {
        self.stall_queue_capacity = AT_END_STALL_QUEUE;
        self.interval_pool = histograms::interval_pool_at_end(
            self.duration_ns,
            self.histogram_interval_ns,
            self.consumer_cpus.len(),
        );
    }
}

/// A workload thread as the probes need to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadThread {
    pub role: ThreadRole,
    /// The CPU it is pinned to, `None` when unpinned.
    pub cpu: Option<Cpu>,
    /// Its id in this process's PID namespace (what syscalls and /proc take here; the
    /// kernel's own number differs inside a container).
    pub tid: u32,
    pub name: String,
}

/// Run on every workload thread, on the thread itself, once it is placed and before it reports
/// ready — so before it can spin: the session's way to introduce the thread to whatever
/// watches it (this module does not know what). An error stops the start.
pub type ThreadStart = Arc<dyn Fn(&WorkloadThread) -> Result<(), String> + Send + Sync>;

/// Why the workload could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot pin {thread} to CPU {cpu}: {source}; check that CPU {cpu} is online and in this process's allowed CPUs (taskset -p $$, the cpuset)")]
    Pin {
        thread: String,
        cpu: Cpu,
        source: std::io::Error,
    },
    #[error("cannot start thread {thread}: {source}")]
    Spawn {
        thread: String,
        source: std::io::Error,
    },
    #[error("cannot make {thread} SCHED_FIFO (priority {priority}): {source}; this needs root or CAP_SYS_NICE, and where the kernel groups RT time (CONFIG_RT_GROUP_SCHED) a cgroup with RT runtime of its own (cpu.rt_runtime_us) — run it with sudo from the root cgroup, or without --fifo")]
    Policy {
        thread: String,
        priority: u8,
        source: std::io::Error,
    },
    #[error("cannot prepare {thread}: {cause}")]
    Prepare { thread: String, cause: String },
    #[error("workload thread {0} ended before the run started")]
    Vanished(String),
}

/// Timing shared by all threads, fixed once every thread is ready.
struct Control {
    go: AtomicBool,
    stop: AtomicBool,
    /// Start of the recorded part (after warm-up).
    record_from_ns: AtomicU64,
    end_ns: AtomicU64,
}

/// Counters a spinning thread bumps only off its fast path (rare events).
#[derive(Default)]
pub struct ThreadCounters {
    pub stalls_dropped: AtomicU64,
    /// Producer: publish attempts refused because a consumer was a ring behind.
    pub ring_full: AtomicU64,
    /// Consumer: messages whose sequence was not the expected one (must stay 0).
    pub sequence_errors: AtomicU64,
    /// Consumer: messages consumed in the recorded part.
    pub messages: AtomicU64,
    /// Consumer: interval rotations skipped because the collector lagged.
    pub rotations_missed: AtomicU64,
    /// Consumer: spikes that did not fit the spike queue.
    pub spikes_dropped: AtomicU64,
}

/// `--attribution end`: each workload thread's stall queue and each consumer's spike queue
/// (8 MiB of stalls each), so that half of one holds some 10 s of the hrtimer storm's stalls
/// or minutes of a quiet run's: they wait there for the end (the default, 32,768, is taken
/// every turn).
pub const AT_END_STALL_QUEUE: usize = 1 << 18;

/// What the session drains from a running workload.
pub enum Output {
    Stall(Stall),
    Spike(Spike),
    /// A finished interval of consumer `consumer` (index into consumer_cpus).
    Interval {
        consumer: usize,
        hists: Box<IntervalHistograms>,
    },
}

struct StallSource {
    rx: spsc::Receiver<Stall>,
}

struct IntervalSource {
    consumer: usize,
    spikes: spsc::Receiver<Spike>,
    done: spsc::Receiver<Box<IntervalHistograms>>,
    pool: spsc::Sender<Box<IntervalHistograms>>,
}

/// A running workload.
pub struct Workload {
    config: WorkloadConfig,
    control: Arc<Control>,
    threads: Vec<WorkloadThread>,
    counters: Vec<(ThreadRole, Arc<ThreadCounters>)>,
    handles: Vec<JoinHandle<()>>,
    stall_sources: Vec<StallSource>,
    interval_sources: Vec<IntervalSource>,
}

/// What a workload thread does before its body: where it may run, the hook, the report.
struct ThreadSetup {
    role: ThreadRole,
    cpu: Cpu,
    pin: bool,
    float_cpus: Vec<Cpu>,
    /// SCHED_FIFO at this priority, set by the thread itself once it is placed.
    fifo: Option<u8>,
    name: String,
    on_start: Option<ThreadStart>,
    ready: mpsc::Sender<Result<WorkloadThread, WorkloadError>>,
}

impl ThreadSetup {
    /// On the new thread: pins it (or keeps it to the float CPUs), runs the hook, says it is
    /// ready (or why not), then runs `body`.
    fn run(self, spinner: Spinner, body: Box<dyn FnOnce(Spinner) + Send>) {
        let (cpu, ready) = (self.cpu, &self.ready);
        if !self.pin && !self.float_cpus.is_empty() {
            // Best effort: floating on fewer CPUs is still a baseline.
            let _ = affinity::set_current_thread_cpus(&self.float_cpus);
        }
        if self.pin {
            if let Err(source) = affinity::pin_current_thread(cpu) {
                let _ = ready.send(Err(WorkloadError::Pin {
                    thread: self.name,
                    cpu,
                    source,
                }));
                return;
            }
        }
        if let Some(priority) = self.fifo {
            if let Err(source) = affinity::set_current_thread_fifo(priority) {
                let _ = ready.send(Err(WorkloadError::Policy {
                    thread: self.name,
                    priority,
                    source,
                }));
                return;
            }
        }
        let me = WorkloadThread {
            role: self.role,
            cpu: self.pin.then_some(cpu),
            tid: affinity::current_tid(),
            name: self.name,
        };
        if let Some(hook) = self.on_start {
            if let Err(cause) = hook(&me) {
                let _ = ready.send(Err(WorkloadError::Prepare {
                    thread: me.name,
                    cause,
                }));
                return;
            }
        }
        if ready.send(Ok(me)).is_err() {
            return;
        }
        body(spinner)
    }
}

/// Interval histograms kept in flight per consumer; the collector returns them after use.
pub const POOL_PER_CONSUMER: usize = 4;

impl Workload {
    /// Spawns and pins every thread, runs `on_start` on each, and waits until all wait at the
    /// start line (their tids are then known); `release` starts them.
    pub fn spawn(
        config: WorkloadConfig,
        on_start: Option<ThreadStart>,
    ) -> Result<Workload, WorkloadError> {
        let control = Arc::new(Control {
            go: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            record_from_ns: AtomicU64::new(u64::MAX),
            end_ns: AtomicU64::new(u64::MAX),
        });
        let (publisher, subscribers) = ring::ring(config.ring_capacity, config.consumer_cpus.len());
        let (ready_tx, ready_rx) = mpsc::channel::<Result<WorkloadThread, WorkloadError>>();
        let mut wl = Workload {
            config: config.clone(),
            control: control.clone(),
            threads: Vec::new(),
            counters: Vec::new(),
            handles: Vec::new(),
            stall_sources: Vec::new(),
            interval_sources: Vec::new(),
        };

        let mut spawn = |role: ThreadRole, cpu: Cpu, body: Box<dyn FnOnce(Spinner) + Send>| {
            let name = match role {
                ThreadRole::Producer => "js-producer".to_string(),
                // Not one of the workload's roles; named for what it is all the same.
                ThreadRole::Consumer(_) | ThreadRole::Watched(_) => format!("js-consumer-{cpu}"),
            };
            let (stall_tx, stall_rx) = spsc::channel(config.stall_queue_capacity);
            let counters = Arc::new(ThreadCounters::default());
            wl.stall_sources.push(StallSource { rx: stall_rx });
            wl.counters.push((role, counters.clone()));
            let spinner = Spinner {
                role,
                cpu: config.pin.then_some(cpu),
                threshold_ns: config.stall_threshold_ns,
                stalls: stall_tx,
                counters,
                control: control.clone(),
            };
            let start = ThreadSetup {
                role,
                cpu,
                pin: config.pin,
                float_cpus: config.float_cpus.clone(),
                fifo: match role {
                    ThreadRole::Consumer(_) => config.consumer_fifo,
                    ThreadRole::Producer | ThreadRole::Watched(_) => None,
                },
                name: name.clone(),
                on_start: on_start.clone(),
                ready: ready_tx.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || start.run(spinner, body))
                .map_err(|source| WorkloadError::Spawn {
                    thread: name,
                    source,
                })?;
            wl.handles.push(handle);
            Ok::<(), WorkloadError>(())
        };

        let interval_ns = config.interval_ns;
        let started = spawn(
            ThreadRole::Producer,
            config.producer_cpu,
            Box::new(move |s| s.run_producer(publisher, interval_ns)),
        );
        let mut result = started;
        let mut interval_sources = Vec::new();
        for (i, (sub, &cpu)) in subscribers
            .into_iter()
            .zip(&config.consumer_cpus)
            .enumerate()
        {
            if result.is_err() {
                break;
            }
            let (spike_tx, spike_rx) = spsc::channel(config.stall_queue_capacity);
            let pool = config.interval_pool.max(1);
            let (done_tx, done_rx) = spsc::channel(pool * 2);
            let (mut pool_tx, pool_rx) = spsc::channel(pool * 2);
            for _ in 0..pool {
                let _ = pool_tx.push(IntervalHistograms::new());
            }
            interval_sources.push(IntervalSource {
                consumer: i,
                spikes: spike_rx,
                done: done_rx,
                pool: pool_tx,
            });
            let period = config.histogram_interval_ns;
            let spikes = SpikeOut {
                consumer: i as u32,
                threshold_ns: config.spike_threshold_ns,
                tx: spike_tx,
            };
            result = spawn(
                ThreadRole::Consumer(i as u32),
                cpu,
                Box::new(move |s| s.run_consumer(sub, done_tx, pool_rx, period, spikes)),
            );
        }
        drop(ready_tx);
        wl.interval_sources = interval_sources;
        wl.await_ready(&ready_rx, result.err())?;
        Ok(wl)
    }

    /// Waits until every spawned thread is at the start line (or failed); on a failure the
    /// others are stopped and joined, and the first error returned.
    fn await_ready(
        &mut self,
        ready_rx: &mpsc::Receiver<Result<WorkloadThread, WorkloadError>>,
        mut first_error: Option<WorkloadError>,
    ) -> Result<(), WorkloadError> {
        for _ in 0..self.handles.len() {
            match ready_rx.recv() {
                Ok(Ok(t)) => self.threads.push(t),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(WorkloadError::Vanished("(unknown)".into()));
                    break;
                }
            }
        }
        if let Some(err) = first_error {
            self.control.stop.store(true, Ordering::SeqCst);
            self.control.go.store(true, Ordering::SeqCst);
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
            return Err(err);
        }
        self.threads.sort_by_key(|t| t.role);
        Ok(())
    }

    /// Spawns, pins and releases the threads (`spawn` then `release`).
    pub fn start(config: WorkloadConfig) -> Result<Workload, WorkloadError> {
        let mut wl = Workload::spawn(config, None)?;
        wl.release();
        Ok(wl)
    }

    /// Starts the clock: the threads leave their start line, warm up, then record.
    pub fn release(&mut self) {
        let record_from = monotonic_ns() + self.config.warmup_ns;
        let c = &self.control;
        c.record_from_ns.store(record_from, Ordering::SeqCst);
        c.end_ns.store(
            record_from.saturating_add(self.config.duration_ns),
            Ordering::SeqCst,
        );
        c.go.store(true, Ordering::SeqCst);
    }

    pub fn config(&self) -> &WorkloadConfig {
        &self.config
    }

    /// The workload's threads, producer first.
    pub fn threads(&self) -> &[WorkloadThread] {
        &self.threads
    }

    /// CLOCK_MONOTONIC time recording starts (after warm-up).
    pub fn record_from_ns(&self) -> Nanos {
        self.control.record_from_ns.load(Ordering::Relaxed)
    }

    /// CLOCK_MONOTONIC time the run ends by itself.
    pub fn end_ns(&self) -> Nanos {
        self.control.end_ns.load(Ordering::Relaxed)
    }

    /// True once every spinning thread has returned.
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Asks every thread to stop now (Ctrl-C).
    pub fn request_stop(&self) {
        self.control.stop.store(true, Ordering::Relaxed);
    }

    /// Checks that every pinned thread is still pinned to its CPU. The kernel moves a thread
    /// without asking when its CPU goes offline or leaves the cpuset; the measurement is then
    /// void, and the explanation says what happened. Called off the measured CPUs, a
    /// syscall per thread.
    pub fn lost_placement(&self) -> Option<String> {
        if self.finished() {
            return None;
        }
        for t in &self.threads {
            let Some(cpu) = t.cpu else { continue };
            let now = match affinity::thread_cpus(t.tid) {
                Ok(now) => now,
                // The thread has just ended (ESRCH): nothing to check.
                Err(_) => continue,
            };
            if now == [cpu] {
                continue;
            }
            let online = crate::platform::input::read_proc(
                format!("/sys/devices/system/cpu/cpu{cpu}/online"),
                crate::platform::input::PROC_FILE,
            )
            .is_none_or(|s| s.trim() != "0");
            let why = if online {
                format!("CPU {cpu} was taken out of this process's cpuset (or someone changed the thread's affinity)")
            } else {
                format!("CPU {cpu} went offline")
            };
            return Some(format!(
                "{} (tid {}) was moved off CPU {cpu}: {why}; it may now run on CPU {}, so the measurement stopped here",
                t.name,
                t.tid,
                crate::units::format_list(&now)
            ));
        }
        None
    }

    /// Stalls waiting in the threads' queues.
    pub fn stalls_queued(&self) -> usize {
        self.stall_sources.iter().map(|s| s.rx.held()).sum()
    }

    /// The share of its room the fullest stall or spike queue holds.
    pub fn queued(&self) -> f64 {
        let stalls = self.stall_sources.iter().map(|s| s.rx.filled());
        let spikes = self.interval_sources.iter().map(|s| s.spikes.filled());
        stalls.chain(spikes).fold(0.0, f64::max)
    }

    pub fn counters(&self) -> &[(ThreadRole, Arc<ThreadCounters>)] {
        &self.counters
    }

    /// Drains everything the threads have produced so far into `sink`. Interval histograms
    /// go back to their consumer's pool once `sink` has returned.
    pub fn drain(&mut self, sink: impl FnMut(Output) -> Option<Box<IntervalHistograms>>) {
        self.drain_some(true, sink);
    }

    /// `drain`, leaving the stalls and spikes in their queues unless `stalls` (a run that
    /// decides at the end takes them when it needs them: `queued`).
    pub fn drain_some(
        &mut self,
        stalls: bool,
        mut sink: impl FnMut(Output) -> Option<Box<IntervalHistograms>>,
    ) {
        if stalls {
            for src in &mut self.stall_sources {
                while let Some(stall) = src.rx.pop() {
                    sink(Output::Stall(stall));
                }
            }
        }
        for src in &mut self.interval_sources {
            while let Some(spike) = if stalls { src.spikes.pop() } else { None } {
                sink(Output::Spike(spike));
            }
            while let Some(hists) = src.done.pop() {
                // The collector hands the box back cleared, in steps of its own
                // (`IntervalHistograms::clear_paced`): clearing it again costs nothing.
                if let Some(mut back) = sink(Output::Interval {
                    consumer: src.consumer,
                    hists,
                }) {
                    back.clear();
                    // The pool has room for every box in flight, so this cannot fail.
                    let _ = src.pool.push(back);
                }
            }
        }
    }

    /// Shows `each` the spikes queued since the last look, leaving them queued (a run that
    /// decides at the end takes them then); `seen`: where each consumer's last look stopped.
    pub fn peek_spikes(&self, seen: &mut [usize], each: &mut dyn FnMut(&Spike)) {
        for (src, seen) in self.interval_sources.iter().zip(seen) {
            src.spikes.peek_new(seen, each);
        }
    }

    /// Stops the threads (if still running) and waits for them. Call `drain` afterwards to
    /// collect the last stalls and the final partial interval.
    pub fn join(&mut self) {
        self.request_stop();
        // Threads still at the start line (never released) leave once they see `go`.
        self.control.go.store(true, Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.join();
    }
}

/// What every spinning thread carries: its identity, the stall detector's state and its
/// way out.
struct Spinner {
    role: ThreadRole,
    cpu: Option<Cpu>,
    threshold_ns: Nanos,
    stalls: spsc::Sender<Stall>,
    counters: Arc<ThreadCounters>,
    control: Arc<Control>,
}

impl Spinner {
    /// Spins until the run starts; returns (record_from, end) or None when told to stop.
    fn wait_for_go(&self) -> Option<(Nanos, Nanos)> {
        while !self.control.go.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        if self.control.stop.load(Ordering::Relaxed) {
            return None;
        }
        Some((
            self.control.record_from_ns.load(Ordering::Relaxed),
            self.control.end_ns.load(Ordering::Relaxed),
        ))
    }

    /// The stall check of every loop iteration: `last` and `now` are consecutive clock reads.
    #[inline(always)]
    fn check(&mut self, last: Nanos, now: Nanos, record_from: Nanos) {
        if now - last > self.threshold_ns && last >= record_from {
            self.report_stall(last, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn report_stall(&mut self, start_ns: Nanos, end_ns: Nanos) {
        let stall = Stall {
            cpu: self.cpu.unwrap_or_else(affinity::current_cpu),
            thread: self.role,
            start_ns,
            end_ns,
        };
        if self.stalls.push(stall).is_err() {
            self.counters.stalls_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn stopping(&self) -> bool {
        self.control.stop.load(Ordering::Relaxed)
    }

    fn run_producer(mut self, mut publisher: ring::Publisher, interval_ns: Nanos) {
        let Some((record_from, end)) = self.wait_for_go() else {
            return;
        };
        let mut last = monotonic_ns();
        let mut next_publish = last;
        loop {
            let now = monotonic_ns();
            self.check(last, now, record_from);
            last = now;
            if now >= end || self.stopping() {
                break;
            }
            if now >= next_publish {
                if publisher.try_publish(now) {
                    next_publish += interval_ns;
                    // After a stall, skip the missed slots instead of bursting to catch up:
                    // the gap then shows in the inter-message time, where it belongs.
                    if next_publish <= now {
                        next_publish = now + interval_ns;
                    }
                } else {
                    self.counters.ring_full.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn run_consumer(
        mut self,
        mut sub: ring::Subscriber,
        mut done: spsc::Sender<Box<IntervalHistograms>>,
        mut pool: spsc::Receiver<Box<IntervalHistograms>>,
        period_ns: Nanos,
        mut spikes: SpikeOut,
    ) {
        let Some((record_from, end)) = self.wait_for_go() else {
            return;
        };
        let Some(mut cur) = pool.pop() else {
            return;
        };
        cur.start_ns = record_from;
        let mut next_rotate = record_from + period_ns;
        let mut last = monotonic_ns();
        let mut last_receive: Nanos = 0;
        let mut messages: u64 = 0;
        let mut sequence_errors: u64 = 0;
        let mut expected: u64 = sub.next();
        loop {
            // Poll first, then read the clock: the receive time is never before the publish.
            let polled = sub.poll();
            let now = monotonic_ns();
            self.check(last, now, record_from);
            last = now;
            if let Some(msg) = polled {
                if msg.seq != expected {
                    sequence_errors += 1;
                }
                expected = msg.seq + 1;
                if msg.publish_ns >= record_from {
                    messages += 1;
                    let transit = now - msg.publish_ns;
                    cur.transit.saturating_record(transit);
                    // A late message published while the consumer was still working off a
                    // backlog is late because of the earlier delay, already reported.
                    if transit > spikes.threshold_ns && msg.publish_ns >= last_receive {
                        spikes.report(&self.counters, msg.publish_ns, now);
                    }
                    // Between two recorded messages only, so the counts line up.
                    if last_receive != 0 {
                        cur.inter_message.saturating_record(now - last_receive);
                    }
                    last_receive = now;
                }
                sub.release();
            }
            if now >= next_rotate {
                if let Some(fresh) = pool.pop() {
                    cur.end_ns = now;
                    let full = std::mem::replace(&mut cur, fresh);
                    cur.start_ns = now;
                    // Cannot fail: `done` holds more slots than there are boxes in existence.
                    let _ = done.push(full);
                } else {
                    // The collector has not returned a box yet: keep recording into this
                    // one; the interval simply gets longer.
                    self.counters
                        .rotations_missed
                        .fetch_add(1, Ordering::Relaxed);
                }
                next_rotate = now + period_ns;
            }
            if now >= end || self.stopping() {
                break;
            }
        }
        cur.end_ns = last;
        self.counters.messages.store(messages, Ordering::Relaxed);
        self.counters
            .sequence_errors
            .store(sequence_errors, Ordering::Relaxed);
        // The final partial interval; `done` holds twice the boxes made, so there is room.
        let _ = done.push(cur);
    }
}

/// A consumer's way out for spikes.
struct SpikeOut {
    consumer: u32,
    threshold_ns: Nanos,
    tx: spsc::Sender<Spike>,
}

impl SpikeOut {
    #[cold]
    #[inline(never)]
    fn report(&mut self, counters: &ThreadCounters, publish_ns: Nanos, receive_ns: Nanos) {
        let spike = Spike {
            consumer: self.consumer,
            publish_ns,
            receive_ns,
        };
        if self.tx.push(spike).is_err() {
            counters.spikes_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}
