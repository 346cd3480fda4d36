//! Output formats against golden files: the seed's histogram blocks and HdrHistogram's
//! `.hgrm` percentile distribution. Regenerate with `UPDATE_GOLDEN=1 cargo test --test formats`
//! after checking the new output by eye.

use hdrhistogram::Histogram;
use jitterscope::report::{hgrm, seed};

fn fixture() -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
    // A latency distribution with a body and a tail, like a real run's.
    for i in 0..10_000u64 {
        h.record(100 + i % 200).unwrap();
    }
    for v in [2_500, 8_000, 45_000, 180_000, 1_200_000] {
        h.record(v).unwrap();
    }
    h
}

fn golden(name: &str, actual: &str) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("missing golden file {path}: {e} (UPDATE_GOLDEN=1 writes it)"));
    assert_eq!(actual, expected, "output differs from {path}");
}

#[test]
fn seed_block_matches_golden() {
    let s = seed::Summary::of(&fixture());
    golden(
        "transit_block.txt",
        &seed::block("Accumulator Message Transit Latency", &s),
    );
}

#[test]
fn hgrm_matches_golden() {
    golden(
        "transit.hgrm",
        &hgrm::percentile_distribution(&fixture(), 1000.0),
    );
}

#[test]
fn hgrm_is_parseable_like_hdrhistograms_plotter_reads_it() {
    // The plotter reads whitespace-separated columns, skipping '#' lines and the header.
    let text = hgrm::percentile_distribution(&fixture(), 1000.0);
    let rows: Vec<Vec<f64>> = text
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() > 20);
    assert!(rows
        .windows(2)
        .all(|w| w[0][1] <= w[1][1] && w[0][0] <= w[1][0]));
    let last = rows.last().unwrap();
    assert_eq!(last.len(), 3, "the 100% line has no 1/(1-p) column");
    assert_eq!(last[1], 1.0);
    assert_eq!(last[2], 10_005.0);
}
