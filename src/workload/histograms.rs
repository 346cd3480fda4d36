//! The latency histograms of one consumer for one interval: fixed bounds, allocated and
//! pre-faulted before the run so recording never allocates or faults.

use hdrhistogram::Histogram;

use crate::model::Nanos;

/// Lowest and highest trackable values (ns) and precision: 1 ns to 100 s, 3 digits.
pub const LOWEST_NS: u64 = 1;
pub const HIGHEST_NS: u64 = 100_000_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid");
    // The counts come from calloc'ed, untouched pages; writing them now takes the page
    // faults here instead of on the spinning thread's first record into each bucket.
    h.reset();
    h
}

/// One consumer's measurements over `[start_ns, end_ns)`.
pub struct IntervalHistograms {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub transit: Histogram<u64>,
    pub inter_message: Histogram<u64>,
}

impl IntervalHistograms {
    pub fn new() -> Box<Self> {
        Box::new(IntervalHistograms {
            start_ns: 0,
            end_ns: 0,
            transit: new_histogram(),
            inter_message: new_histogram(),
        })
    }

    pub fn clear(&mut self) {
        self.transit.reset();
        self.inter_message.reset();
        self.start_ns = 0;
        self.end_ns = 0;
    }
}
