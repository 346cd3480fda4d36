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

impl Summary {
    /// The figures without the percentile curve: cheap enough for once-a-second updates.
    pub fn brief(h: &Histogram<u64>) -> Summary {
        Summary::brief_paced(h, &mut || {})
    }

    /// `brief` in steps, calling `pace` between them (each is a pass over the counts: the
    /// collector may share a CPU with the workload, see `platform::pace`).
    pub fn brief_paced(h: &Histogram<u64>, pace: &mut dyn FnMut()) -> Summary {
        let empty = h.is_empty();
        let mean = if empty { 0.0 } else { h.mean() };
        let mut percentiles = BTreeMap::new();
        for &(key, _, q) in &PERCENTILES {
            pace();
            percentiles.insert(
                key.to_string(),
                if empty { 0 } else { h.value_at_quantile(q) },
            );
        }
        Summary {
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            mean,
            max: if empty { 0 } else { h.max() },
            percentiles,
            curve: Vec::new(),
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
