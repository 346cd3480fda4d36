//! The latency histograms of one consumer for one interval: fixed bounds, allocated and
//! pre-faulted before the run so recording never allocates or faults.

use hdrhistogram::Histogram;

use crate::model::Nanos;

/// Lowest and highest trackable values (ns) and precision: 1 ns to 100 s, 3 digits.
pub const LOWEST_NS: u64 = 1;
pub const HIGHEST_NS: u64 = 100_000_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// The longest one such histogram's reset takes on the collector's CPU (its whole counts
/// array written, cold), for the pacer.
pub const RESET_NS: u64 = 50_000;

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
        self.clear_paced(&mut || {});
    }

    /// `clear`, calling `pace` before each histogram's reset, which writes its whole counts
    /// array in one go (some 230 KiB: `RESET_NS`; see `platform::pace`). An empty one is left
    /// as it is: clearing a box already cleared costs nothing.
    pub fn clear_paced(&mut self, pace: &mut dyn FnMut()) {
        for h in [&mut self.transit, &mut self.inter_message] {
            if !h.is_empty() {
                pace();
                h.reset();
            }
        }
        self.start_ns = 0;
        self.end_ns = 0;
    }
}

/// Bytes of one `IntervalHistograms`' counts (two histograms of 28,672 `u64` counts each).
pub const BOX_BYTES: usize = 2 * 28_672 * 8;
/// `--attribution end`: the most memory the interval boxes made before recording take, all
/// consumers together (73 boxes: a 68 s run of one consumer held to the end).
pub const AT_END_INTERVAL_ROOM: usize = 32 << 20;

/// `--attribution end`: interval boxes made per consumer before recording, so that the
/// collector can leave each second's histograms alone until the workload stops (the live
/// view shows each second's rate and largest transit, O(1) to read): one for each interval of
/// `duration_ns`, the final partial one, and four more for the consumer to rotate into
/// between two turns of the collector, within `AT_END_INTERVAL_ROOM` for all `consumers`.
/// A longer run holds what fits; the collector then takes the oldest held interval each time
/// a new one comes, as it takes every interval when deciding live (`session::run`).
pub fn interval_pool_at_end(duration_ns: Nanos, period_ns: Nanos, consumers: usize) -> usize {
    let wanted = duration_ns.div_ceil(period_ns.max(1)) as usize + 1 + KEPT_FOR_ROTATION;
    let room = AT_END_INTERVAL_ROOM / (BOX_BYTES * consumers.max(1));
    wanted.min(room).max(super::POOL_PER_CONSUMER)
}

/// Boxes left in a consumer's pool at each collector turn: the rotations that may come before
/// the next (an interval is a second, a turn one to three: a late turn lets a fourth come).
pub const KEPT_FOR_ROTATION: usize = 4;

/// `into.add(from)` for histograms of the same bounds, from `from`'s recorded buckets read
/// beforehand (`summary::read_buckets`): the crate's `add` walks every count of the source
/// (some 230 KiB, cold), and the collector reads them once for all it does with them.
/// `pace` is called between steps of `ADD_STEP` buckets (see `platform::pace`).
pub fn add_buckets(into: &mut Histogram<u64>, buckets: &[(u64, u64)], pace: &mut dyn FnMut()) {
    for (i, step) in buckets.chunks(ADD_STEP).enumerate() {
        if i > 0 {
            pace();
        }
        for &(value, count) in step {
            // Same bounds: every value of `from` fits, so this cannot fail.
            let _ = into.record_n(value, count);
        }
    }
}

/// Buckets added between two calls of `add_buckets`' pace: each is a record into a cold
/// counts array, and a second's worth of buckets added in one piece would be a long slice.
const ADD_STEP: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{read_buckets, spans_walked};

    #[test]
    fn adding_the_buckets_is_the_crates_add() {
        let mut x = 3u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        let mut ours = new_histogram();
        let mut theirs = new_histogram();
        for round in 0..4 {
            let mut from = new_histogram();
            for _ in 0..(round * 5_000) {
                let r = next();
                from.record(1 + (r >> 20) % (if r >> 62 == 0 { HIGHEST_NS } else { 100_000 }))
                    .unwrap();
            }
            let mut paces = 0;
            let mut buckets = Vec::new();
            read_buckets(&from, &mut || paces += 1, &mut buckets);
            let mut adds = 0;
            add_buckets(&mut ours, &buckets, &mut || adds += 1);
            // A pace between every two steps of buckets, none before the first.
            assert_eq!(
                adds,
                buckets.len().saturating_sub(1) / ADD_STEP,
                "round {round}"
            );
            theirs.add(&from).unwrap();
            assert_eq!(ours, theirs, "round {round}");
            assert_eq!(
                (ours.min(), ours.max(), ours.len()),
                (theirs.min(), theirs.max(), theirs.len())
            );
            assert_eq!(paces, spans_walked(&from));
        }
    }

    #[test]
    fn a_box_holds_the_bytes_its_pool_is_sized_by() {
        let h = IntervalHistograms::new();
        assert_eq!(
            (h.transit.distinct_values() + h.inter_message.distinct_values()) * 8,
            BOX_BYTES
        );
    }

    #[test]
    fn deciding_at_the_end_holds_every_interval_of_a_run_that_fits_its_room() {
        let s = 1_000_000_000;
        // 10 s: ten intervals, the final partial one, four to rotate into.
        assert_eq!(interval_pool_at_end(10 * s, s, 1), 15);
        assert_eq!(interval_pool_at_end(10 * s + 1, s, 1), 16);
        // An hour of one consumer: what 32 MiB holds.
        assert_eq!(interval_pool_at_end(3600 * s, s, 1), 73);
        assert_eq!(interval_pool_at_end(3600 * s, s, 2), 36);
        // Never fewer than a run deciding live has.
        assert_eq!(
            interval_pool_at_end(3600 * s, s, 64),
            crate::workload::POOL_PER_CONSUMER
        );
        assert_eq!(interval_pool_at_end(0, s, 1), 5);
    }

    #[test]
    fn a_paced_clear_paces_before_each_reset_and_clears_both() {
        let mut h = IntervalHistograms::new();
        h.transit.record(100).unwrap();
        h.inter_message.record(200).unwrap();
        h.start_ns = 5;
        let mut paces = 0;
        h.clear_paced(&mut || paces += 1);
        assert_eq!(paces, 2);
        assert!(h.transit.is_empty() && h.inter_message.is_empty() && h.start_ns == 0);
        // An empty histogram is not reset, so no pace before it.
        h.transit.record(100).unwrap();
        let mut paces = 0;
        h.clear_paced(&mut || paces += 1);
        assert_eq!(paces, 1);
        assert!(h.transit.is_empty());
    }
}
