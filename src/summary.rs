//! A latency histogram reduced to the figures every report prints and the run file stores:
//! count, min, mean, max, the seed's percentiles and the percentile curve.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentile ticks per half distance, as HdrHistogram's own tools use (`.hgrm` files and the
/// run file's curves).
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The percentiles the seed printed, as (JSON key, label, quantile).
pub const PERCENTILES: [(&str, &str, f64); 7] = [
    ("50", "50.00%", 0.50),
    ("90", "90.00%", 0.90),
    ("99", "99.00%", 0.99),
    ("99.9", "99.90%", 0.999),
    ("99.99", "99.99%", 0.9999),
    ("99.999", "99.999%", 0.99999),
    ("99.9999", "99.9999%", 0.999999),
];

/// A histogram reduced to the figures the reports print (and the run file stores).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    /// Percentile ("50", "99.99", …) → value in ns. The keys of `PERCENTILES` sort in
    /// percentile order as strings, so the map prints in the natural order.
    pub percentiles: BTreeMap<String, u64>,
    /// The percentile curve (quantile, value ns), as in an `.hgrm`, so charts and comparisons
    /// can be drawn from the run file alone.
    #[serde(default)]
    pub curve: Vec<(f64, u64)>,
}

/// A histogram's recorded buckets, (highest value, count) in order: read once
/// (`read_buckets`), then added, summarised and logged from (each walk of a histogram goes
/// through every count up to its largest value's bucket, some 20,000 for a transit of a few
/// milliseconds, cold after a second's sleep).
pub type Buckets = Vec<(u64, u64)>;

/// Parts a span of equally wide buckets is summed in before its buckets are looked at one
/// by one (64 to 128 buckets each with the workload's bounds).
const SPAN_PARTS: u64 = 16;

/// The recorded buckets of `h` into `out` (emptied first), in order, as the crate's
/// `iter_recorded` yields them, calling `pace` after each span (a few µs of work at most):
/// how the collector reads a histogram when it may share a CPU with the workload (see
/// `platform::pace`). The crate's iterator does a dozen steps of bookkeeping for
/// every count up to the largest value's (some 20,000 for a transit of a few ms); here each
/// span of equally wide buckets (a power of two of values) is summed in parts, a tight loop
/// over the counts, and only the parts holding anything are looked at bucket by bucket.
pub fn read_buckets(h: &Histogram<u64>, pace: &mut dyn FnMut(), out: &mut Buckets) {
    out.clear();
    if h.is_empty() {
        return;
    }
    let max = h.max();
    let mut lo = 0u64;
    while lo <= max {
        let width = h.equivalent_range(lo);
        let end = span_end(h, lo, width, max);
        let part = ((end - lo) / SPAN_PARTS).max(width);
        let mut a = lo;
        while a < end && a <= max {
            let last = (a + part - 1).min(end - 1);
            if h.count_between(a, last) > 0 {
                let mut v = a;
                while v <= last {
                    let count = h.count_at(v);
                    if count > 0 {
                        out.push((h.highest_equivalent(v), count));
                    }
                    v += width;
                }
            }
            a += part;
        }
        pace();
        lo = end;
    }
}

/// Where the span of buckets as wide as `width` from `lo` ends (exclusive): the first power of
/// two past `lo` whose buckets are wider, or past `max`.
fn span_end(h: &Histogram<u64>, lo: u64, width: u64, max: u64) -> u64 {
    let mut end = lo.max(1);
    while end <= max && h.equivalent_range(end) == width {
        end = end.saturating_mul(2);
    }
    end
}

/// The spans `read_buckets` walks (and paces after) for a histogram of the workload's bounds
/// (1 ns to 100 s, 3 digits): values below 2048 in one, then one per power of two up to `h`'s
/// largest.
#[cfg(test)]
pub fn spans_walked(h: &Histogram<u64>) -> usize {
    match h.max() {
        _ if h.is_empty() => 0,
        max if max < 2048 => 1,
        max => (64 - max.leading_zeros()) as usize - 10,
    }
}

impl Summary {
    /// The figures without the percentile curve: cheap enough for once-a-second updates.
    pub fn brief(h: &Histogram<u64>) -> Summary {
        Summary::brief_paced(h, &mut || {})
    }

    /// `brief` in one paced pass over the recorded buckets (`read_buckets`). The
    /// figures are the crate's `mean` and `value_at_quantile`, computed the same way (one pass
    /// each, cold every second, was the collector's longest piece of work).
    pub fn brief_paced(h: &Histogram<u64>, pace: &mut dyn FnMut()) -> Summary {
        let mut buckets = Buckets::new();
        read_buckets(h, pace, &mut buckets);
        Summary::brief_of(h, &buckets)
    }

    /// The count, smallest, largest and percentiles of `h` — `brief` without the mean (0) —
    /// in one walk of its counts up to the highest percentile (the crate's
    /// `value_at_quantiles`, which sums them eight at a time): what the live view shows of an
    /// interval it does not take in (deciding at the end); about a quarter of the time of
    /// `read_buckets` and `brief_of`.
    pub fn percentiles_only(h: &Histogram<u64>) -> Summary {
        let values: Vec<u64> = if h.is_empty() {
            vec![0; PERCENTILES.len()]
        } else {
            h.value_at_quantiles(PERCENTILES.map(|(_, _, q)| q))
                .collect()
        };
        Summary::without_curve(h, 0.0, values)
    }

    /// `h`'s count, smallest and largest, with `mean` and the `PERCENTILES`' `values`.
    fn without_curve(
        h: &Histogram<u64>,
        mean: f64,
        values: impl IntoIterator<Item = u64>,
    ) -> Summary {
        let empty = h.is_empty();
        Summary {
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            mean,
            max: if empty { 0 } else { h.max() },
            percentiles: PERCENTILES
                .iter()
                .zip(values)
                .map(|(&(key, _, _), v)| (key.to_string(), v))
                .collect(),
            curve: Vec::new(),
        }
    }

    /// `brief` from the recorded buckets of a histogram with `like`'s bounds (`h` itself),
    /// already read (`read_buckets`): the count, smallest and largest as the histogram's own.
    pub fn brief_of(like: &Histogram<u64>, buckets: &[(u64, u64)]) -> Summary {
        let h = like;
        let total: u64 = buckets.iter().map(|&(_, count)| count).sum();
        let mut values = [0u64; PERCENTILES.len()];
        let mut mean = 0.0;
        if total > 0 {
            // The count each percentile's bucket must reach (at least the first recorded).
            let targets =
                PERCENTILES.map(|(_, _, q)| ((q.min(1.0) * total as f64).ceil() as u64).max(1));
            let (mut next, mut below) = (0, 0u64);
            for &(value, count) in buckets {
                mean += h.median_equivalent(value) as f64 * count as f64 / total as f64;
                below += count;
                while next < targets.len() && below >= targets[next] {
                    values[next] = value;
                    next += 1;
                }
            }
        }
        let (min, max) = match (buckets.first(), buckets.last()) {
            (Some(&(first, _)), Some(&(last, _))) => (h.lowest_equivalent(first), last),
            _ => (0, 0),
        };
        Summary {
            count: total,
            min,
            max,
            ..Summary::without_curve(h, mean, values)
        }
    }

    pub fn of(h: &Histogram<u64>) -> Summary {
        let mut s = Summary::brief(h);
        if !h.is_empty() {
            s.curve = h
                .iter_quantiles(TICKS_PER_HALF_DISTANCE)
                .map(|v| (v.quantile_iterated_to(), v.value_iterated_to()))
                .collect();
        }
        s
    }

    pub fn percentile(&self, key: &str) -> Option<u64> {
        self.percentiles.get(key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workload's bounds: 1 ns to 100 s, 3 digits.
    fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 100_000_000_000, 3).unwrap()
    }

    /// A histogram of `n` values, each `pick`ed from the next number of a generator at `x`.
    fn filled(n: usize, x: &mut u64, pick: impl Fn(u64) -> u64) -> Histogram<u64> {
        let mut h = histogram();
        for _ in 0..n {
            *x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record(pick(*x)).unwrap();
        }
        h
    }

    /// The figures as the crate computes them, one pass each.
    fn crates(h: &Histogram<u64>) -> (f64, Vec<u64>) {
        let empty = h.is_empty();
        let mean = if empty { 0.0 } else { h.mean() };
        let p = PERCENTILES
            .iter()
            .map(|&(_, _, q)| if empty { 0 } else { h.value_at_quantile(q) })
            .collect();
        (mean, p)
    }

    #[test]
    fn the_one_pass_figures_are_the_crates() {
        let mut cases = vec![histogram()];
        let mut x = 7u64;
        for n in [1usize, 2, 10, 1_000, 100_000] {
            // Mostly short, a long tail, a few outliers far out.
            cases.push(filled(n, &mut x, |x| match x >> 60 {
                0 => 1_000_000 + (x >> 20) % 50_000_000_000,
                1..=3 => 5_000 + (x >> 30) % 500_000,
                _ => 50 + (x >> 40) % 400,
            }));
        }
        let mut h = histogram();
        h.record_n(100, 999_999).unwrap();
        h.record(7_000_000).unwrap();
        cases.push(h);
        for (n, h) in cases.iter().enumerate() {
            let s = Summary::brief(h);
            let (mean, p) = crates(h);
            assert_eq!(s.mean.to_bits(), mean.to_bits(), "case {n}: mean");
            let ours: Vec<u64> = PERCENTILES
                .iter()
                .map(|(k, _, _)| s.percentiles[*k])
                .collect();
            assert_eq!(ours, p, "case {n}: percentiles");
            assert_eq!(s.count, h.len());
            // The live view's figures of a held interval: the same, but the mean.
            let only = Summary::percentiles_only(h);
            assert_eq!(
                only,
                Summary { mean: 0.0, ..s },
                "case {n}: percentiles only"
            );
        }
    }

    #[test]
    fn the_buckets_read_are_the_crates_recorded_ones() {
        let mut x = 11u64;
        for n in [0usize, 1, 3, 100, 10_000] {
            // Anywhere in the bounds, around the first span's end, the usual transits.
            let mut h = filled(n, &mut x, |x| match x >> 61 {
                0 => (x >> 20) % 100_000_000_000,
                1 => (x >> 30) % 4_096,
                2 => 2_047 + (x >> 40) % 3,
                _ => 50 + (x >> 40) % 5_000_000,
            });
            if n == 3 {
                h.record(0).unwrap();
                h.record(100_000_000_000).unwrap();
            }
            let theirs: Vec<(u64, u64)> = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            let mut ours = Buckets::new();
            read_buckets(&h, &mut || {}, &mut ours);
            assert_eq!(ours, theirs, "{n} values");
        }
    }

    #[test]
    fn the_pass_paces_after_each_span() {
        let mut h = histogram();
        for v in 0..2_000u64 {
            h.record(1_000 + v * 1_000).unwrap();
        }
        let mut paces = 0;
        let s = Summary::brief_paced(&h, &mut || paces += 1);
        assert_eq!(paces, spans_walked(&h), "max {}", h.max());
        assert_eq!(paces, 11, "values to 2 ms: 2048 ns, then 10 powers of two");
        assert_eq!(s, Summary::brief(&h));
    }
}
