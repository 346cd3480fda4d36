//! Each consumer's interval histograms: the run's totals, the live view's latest second and
//! the interval log's lines.

use hdrhistogram::Histogram;

use crate::live::LiveModel;
use crate::model::Nanos;
use crate::platform::pace::Pacer;
use crate::report::build::consumer_key;
use crate::report::hlog::HlogWriter;
use crate::summary::{read_buckets, Buckets, Summary};
use crate::workload::histograms::{add_buckets, IntervalHistograms, RESET_NS};

/// One consumer's histograms over the whole run.
pub(super) struct ConsumerTotals {
    pub transit: Histogram<u64>,
    pub inter_message: Histogram<u64>,
    /// The latest finished interval, for the progress line.
    pub last_transit: Option<Summary>,
    pub last_messages: u64,
    pub last_interval_ns: Nanos,
}

/// An interval's histograms as recorded buckets (`summary::read_buckets`).
#[derive(Default)]
pub(super) struct IntervalBuckets {
    transit: Buckets,
    inter_message: Buckets,
}

/// The interval log, the base time its offsets count from, and its first error.
pub(super) type IntervalLog<'a> = (&'a mut HlogWriter, Nanos, &'a mut Option<std::io::Error>);

/// What the collector does with each interval's histograms (the drain's part that is not
/// about stalls), over the recorder's parts it needs.
pub(super) struct IntervalWork<'a> {
    pub(super) totals: &'a mut [ConsumerTotals],
    pub(super) view_totals: &'a mut [Histogram<u64>],
    pub(super) live: &'a mut LiveModel,
    pub(super) log: IntervalLog<'a>,
    pub(super) buckets: &'a mut IntervalBuckets,
    pub(super) pacer: &'a mut Pacer,
    pub(super) run_totals: bool,
}

impl IntervalWork<'_> {
    /// What an interval shows live that costs nothing to read: its rate and largest transit
    /// (the histograms keep both as they record), as soon as it comes.
    pub(super) fn glance(&mut self, consumer: usize, hists: &IntervalHistograms) {
        let t = &mut self.totals[consumer];
        t.last_messages = hists.transit.len();
        t.last_interval_ns = hists.end_ns.saturating_sub(hists.start_ns);
        if !hists.transit.is_empty() {
            self.live.push_max(consumer, hists.transit.max());
        }
    }

    /// Deciding at the end, the held interval's transit for the live view, read without
    /// taking it in: its percentiles (one walk of its counts up to the highest) and, when the
    /// view shows it, its part of "since start". The rest is left for the end (the mean too).
    pub(super) fn preview(&mut self, consumer: usize, hists: &IntervalHistograms) {
        self.totals[consumer].last_transit = Some(Summary::percentiles_only(&hists.transit));
        if self.run_totals {
            add_to_view(&mut self.view_totals[consumer], &hists.transit, self.pacer);
        }
    }

    /// Everything else, which walks the histograms' counts: the run's totals, the interval
    /// log's lines and, for the interval that just came (`latest`), its percentiles for the
    /// live view.
    pub(super) fn take(&mut self, consumer: usize, hists: &IntervalHistograms, latest: bool) {
        let pacer = &mut *self.pacer;
        // Each histogram's counts walked once; everything below reads its buckets.
        read_paced(&hists.transit, &mut self.buckets.transit, pacer);
        pacer.between();
        read_paced(&hists.inter_message, &mut self.buckets.inter_message, pacer);
        pacer.between();
        let (transit, inter_message) = (&self.buckets.transit, &self.buckets.inter_message);
        let t = &mut self.totals[consumer];
        add_paced(&mut t.transit, transit, pacer);
        add_paced(&mut t.inter_message, inter_message, pacer);
        pacer.between();
        // A held interval taken late is not the live view's latest, nor in what it counted
        // since its last reset.
        if latest {
            t.last_transit = Some(Summary::brief_of(&hists.transit, transit));
            if self.run_totals {
                add_to_view(&mut self.view_totals[consumer], &hists.transit, pacer);
            }
        }
        let log = (&mut *self.log.0, self.log.1, &mut *self.log.2);
        write_interval(log, consumer, hists, self.buckets, pacer);
    }
}

/// An interval's transit added to the live view's "since start" (histograms of one set of
/// bounds, so the crate adds count to count): a piece of its own, as long as a reset (a
/// walk of the whole counts array, `RESET_NS`). Reading the interval's buckets one by one
/// and merging them into a list of the sum's took about twice as long.
fn add_to_view(total: &mut Histogram<u64>, interval: &Histogram<u64>, pacer: &mut Pacer) {
    if interval.is_empty() {
        return;
    }
    pacer.before(RESET_NS);
    // Of one set of bounds, the add cannot fail (a count saturates).
    let _ = total.add(interval);
}

/// A histogram's recorded buckets (`summary::read_buckets`), `pacer` consulted as it walks.
fn read_paced(h: &Histogram<u64>, into: &mut Buckets, pacer: &mut Pacer) {
    read_buckets(
        h,
        &mut || {
            pacer.between();
        },
        into,
    );
}

/// Buckets added to a histogram, `pacer` consulted as it goes.
fn add_paced(total: &mut Histogram<u64>, buckets: &Buckets, pacer: &mut Pacer) {
    add_buckets(total, buckets, &mut || {
        pacer.between();
    });
}

pub(super) fn write_interval(
    (hlog, base_mono, error): IntervalLog<'_>,
    consumer: usize,
    h: &IntervalHistograms,
    buckets: &IntervalBuckets,
    pacer: &mut Pacer,
) {
    if error.is_some() || h.transit.is_empty() {
        return;
    }
    let offset = h.start_ns.saturating_sub(base_mono);
    let length = h.end_ns.saturating_sub(h.start_ns);
    let key = consumer_key(consumer);
    for (kind, hist, b) in [
        ("transit", &h.transit, &buckets.transit),
        ("inter_message", &h.inter_message, &buckets.inter_message),
    ] {
        pacer.between();
        let w = hlog.write_buckets(&format!("{key}.{kind}"), hist, b, offset, length, pacer);
        if let Err(e) = w {
            *error = Some(e);
            return;
        }
    }
}
