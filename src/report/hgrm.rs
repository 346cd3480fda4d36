//! HdrHistogram's percentile distribution (`.hgrm`), byte-compatible with Java's
//! `outputPercentileDistribution`, so runs open in the HdrHistogram plotter and overlay with
//! jHiccup output.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

pub use crate::summary::TICKS_PER_HALF_DISTANCE;

/// Renders the distribution of `h` with values divided by `unit_ratio` (1000 for ns → µs).
pub fn percentile_distribution(h: &Histogram<u64>, unit_ratio: f64) -> String {
    let digits = h.sigfig() as usize;
    let mut out = String::new();
    let _ = write!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total: u64 = 0;
    if !h.is_empty() {
        for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / unit_ratio;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:>12.digits$} {q:>2.12} {total:>10} {:>14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:>12.digits$} {q:>2.12} {total:>10}");
            }
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.digits$}, StdDeviation   = {:>12.digits$}]",
        h.mean() / unit_ratio,
        h.stdev() / unit_ratio
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.digits$}, Total count    = {:>12}]",
        h.max() as f64 / unit_ratio,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_bucket_count(h.sigfig())
    );
    out
}

/// HdrHistogram's sub-bucket count for a precision: the power of two that holds
/// 2 × 10^digits values at unit resolution.
fn sub_bucket_count(digits: u8) -> u64 {
    let single_unit = 2 * 10u64.pow(digits as u32);
    single_unit.next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_buckets_match_java_for_three_digits() {
        assert_eq!(sub_bucket_count(3), 2048);
        assert_eq!(sub_bucket_count(2), 256);
    }

    #[test]
    fn empty_histogram_has_header_and_footer_only() {
        let h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3).unwrap();
        let s = percentile_distribution(&h, 1.0);
        assert!(s.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n#[Mean"));
        assert!(s.contains("Total count    =            0]"));
    }
}
