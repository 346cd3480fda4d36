//! What accumulates during a run on the attribution side: the engine, the run-wide ranking,
//! the worst stalls and spikes, the lost-record and steal tallies. Fed with stalls, spikes
//! and kernel records; read by the live view and, at the end, by the run file.

use std::collections::BTreeMap;

use super::book::StallBook;
use super::engine::{Engine, EngineConfig, SpikeVerdict, Verdict};
use super::ranking::Ranking;
use super::theft::TheftTally;
use crate::model::{Cause, Cpu, CulpritClass, Interruption, Nanos, Spike, Stall, StealSample};

/// Stalls (and spikes) decided per step at the end of a run.
const FINISH_STEP: usize = 256;

/// Spikes the live feed keeps between two looks.
const FRESH_SPIKES: usize = 40;

pub struct RunAttribution {
    pub engine: Engine,
    pub ranking: Ranking,
    pub book: StallBook,
    /// False without kernel probes: stalls are only counted, not ranked.
    pub probes_on: bool,
    producer_cpu: Cpu,
    consumer_cpus: Vec<Cpu>,
    /// The worst spikes (bounded), and how many there were.
    pub spikes: Vec<SpikeVerdict>,
    pub spike_count: u64,
    keep: usize,
    /// Kernel records reported lost so far (from the probes' lost windows).
    pub lost_records: u64,
    /// Spikes decided since the live view last looked (the latest `FRESH_SPIKES`; the view
    /// takes them).
    pub fresh_spikes: Vec<SpikeVerdict>,
    /// Steal-clock growth per CPU seen since recording started.
    record_from: Nanos,
    pub steal_seen: BTreeMap<Cpu, Nanos>,
    /// The longest single `self` theft per CPU (the run file's `overhead.longest_self`).
    pub longest_self: BTreeMap<Cpu, Nanos>,
    /// Verdicts of the step under way (the buffer is kept between steps).
    decided: Vec<Verdict>,
    /// Kernel records lost per CPU.
    pub lost_per_cpu: BTreeMap<Cpu, u64>,
    /// Stolen time per CPU, class and culprit, kept when the metrics file asks for it.
    pub theft: Option<TheftTally>,
}

impl RunAttribution {
    /// `keep` stalls and spikes are kept with their verdicts; `steal_clock` says whether the
    /// probes read one (see `Engine::set_steal_clock`).
    pub fn new(
        producer_cpu: Cpu,
        consumer_cpus: Vec<Cpu>,
        keep: usize,
        probes_on: bool,
        steal_clock: bool,
        record_from: Nanos,
    ) -> Self {
        let mut engine = Engine::new(EngineConfig::default());
        engine.set_steal_clock(steal_clock);
        RunAttribution {
            engine,
            ranking: Ranking::default(),
            book: StallBook::new(keep),
            probes_on,
            producer_cpu,
            consumer_cpus,
            spikes: Vec::new(),
            spike_count: 0,
            keep,
            lost_records: 0,
            fresh_spikes: Vec::new(),
            record_from,
            steal_seen: BTreeMap::new(),
            longest_self: BTreeMap::new(),
            decided: Vec::new(),
            lost_per_cpu: BTreeMap::new(),
            theft: None,
        }
    }

    /// Keeps stolen time per CPU, class and culprit from now on (`theft`).
    pub fn keep_theft(&mut self) {
        self.theft.get_or_insert_with(TheftTally::default);
    }

    pub fn stall(&mut self, s: Stall) {
        self.engine.push_stall(s);
    }

    pub fn spike(&mut self, s: Spike) {
        let consumer_cpu = self
            .consumer_cpus
            .get(s.consumer as usize)
            .copied()
            .unwrap_or(self.producer_cpu);
        self.engine.push_spike(s, self.producer_cpu, consumer_cpu);
    }

    pub fn interruption(&mut self, i: Interruption) {
        self.engine.push_interruption(i);
    }

    pub fn cause(&mut self, c: Cause) {
        self.engine.push_cause(c);
    }

    pub fn steal(&mut self, s: StealSample) {
        if s.to_ns >= self.record_from {
            *self.steal_seen.entry(s.cpu).or_default() += s.steal_ns;
        }
        self.engine.push_steal(s);
    }

    /// Steal growth that is not the engine's to place (watch mode: a watched thread's own,
    /// while it ran): counted in the per-CPU tally only.
    pub fn steal_seen_only(&mut self, s: &StealSample) {
        if s.to_ns >= self.record_from {
            *self.steal_seen.entry(s.cpu).or_default() += s.steal_ns;
        }
    }

    /// A verdict decided outside the engine (watch mode's host preemption while a thread ran).
    pub fn keep_verdict(&mut self, v: Verdict) {
        self.keep(v);
    }

    /// `count` kernel records of `cpu` were lost in `[start_ns, end_ns]`.
    pub fn lost(&mut self, cpu: Cpu, start_ns: Nanos, end_ns: Nanos, count: u64) {
        if count > 0 {
            self.lost_records += count;
            *self.lost_per_cpu.entry(cpu).or_default() += count;
        }
        self.engine.mark_lost(cpu, start_ns, end_ns);
    }

    /// Decides what the watermark has passed.
    pub fn decide(&mut self, watermark: Nanos) {
        self.decide_with(watermark, &mut |_| {});
    }

    /// Decides what the watermark has passed, showing each verdict to `also` first.
    pub fn decide_with(&mut self, watermark: Nanos, also: &mut dyn FnMut(&Verdict)) {
        while self.decide_some(watermark, usize::MAX, also) {}
    }

    /// Decides at most `limit` of the stalls (and spikes) the watermark has passed, showing
    /// each verdict to `also` first; says whether more remain (the collector works in short
    /// slices when it shares a measured CPU).
    pub fn decide_some(
        &mut self,
        watermark: Nanos,
        limit: usize,
        also: &mut dyn FnMut(&Verdict),
    ) -> bool {
        let mut decided = std::mem::take(&mut self.decided);
        let more = self.engine.advance_some(watermark, limit, &mut decided);
        for v in decided.drain(..) {
            also(&v);
            self.keep(v);
        }
        self.decided = decided;
        self.keep_spikes();
        self.engine.set_timeline_from(self.book.admission_ns());
        more
    }

    /// Decides everything still pending (end of run).
    pub fn finish(&mut self) {
        self.finish_with(&mut |_| {});
    }

    /// Decides everything still pending, showing each verdict to `also` first.
    pub fn finish_with(&mut self, also: &mut dyn FnMut(&Verdict)) {
        // In steps, each verdict kept (or dropped) before the next step's are made: at the
        // end of a watch thousands of stalls may still be pending at once.
        while self.decide_some(Nanos::MAX, FINISH_STEP, also) {}
        self.trim_spikes();
    }

    fn keep(&mut self, v: Verdict) {
        if self.probes_on {
            self.ranking.add(&v);
        }
        if let Some(t) = &mut self.theft {
            // Without probes nothing is attributed, but the stall is still a stall.
            match self.probes_on {
                true => t.add(&v),
                false => t.stall(&v),
            }
        }
        for c in v
            .culprits
            .iter()
            .filter(|c| c.class() == CulpritClass::SelfNoise)
        {
            let longest = self.longest_self.entry(v.stall.cpu).or_default();
            *longest = (*longest).max(c.longest_ns);
        }
        if let Some(rejected) = self.book.add(v) {
            self.engine.recycle(rejected);
        }
    }

    fn keep_spikes(&mut self) {
        let new = self.engine.take_spikes();
        self.spike_count += new.len() as u64;
        // The live feed shows the latest few; the rest only counts.
        let skip = new.len().saturating_sub(FRESH_SPIKES / 2);
        self.fresh_spikes.extend(new[skip..].iter().cloned());
        if self.fresh_spikes.len() > FRESH_SPIKES {
            self.fresh_spikes
                .drain(..self.fresh_spikes.len() - FRESH_SPIKES);
        }
        self.spikes.extend(new);
        // The longest `keep` stay; the others go a few at a time without sorting (a storm
        // brings thousands a second).
        let slack = (self.keep / 8).max(16);
        if self.spikes.len() > self.keep + slack {
            if self.keep > 0 {
                self.spikes.select_nth_unstable_by_key(self.keep - 1, |v| {
                    std::cmp::Reverse(v.spike.transit_ns())
                });
            }
            self.spikes.truncate(self.keep);
        }
    }

    fn trim_spikes(&mut self) {
        self.spikes
            .sort_by_key(|v| std::cmp::Reverse(v.spike.transit_ns()));
        self.spikes.truncate(self.keep);
    }
}
